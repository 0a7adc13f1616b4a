"""Scorers of accuracy items: from an answer's text and the item's reference to right or wrong,
with what was extracted, by a rule stated here (and in docs/release/accuracy.md).

The run scores each answer with `score` and keeps the answer, the reference and the verdict in
accuracy.parquet; `passport verify` scores every answer again with the same function, so a
verdict is never taken on trust. Standard library only (JSON Schema through `jsonschema`,
imported when an item uses it).

- `exact`: the answer, whitespace trimmed at both ends, equals the reference (trimmed), case and
  inner spacing as written.
- `numeric`: the number after the answer's last `####` if it has one, else after its last
  "answer is" / "answer:" (any case), else its last number; thousands separators dropped, a
  trailing full stop ignored. Right when |number - reference| <= `tolerance` x max(1, |reference|).
- `choice`: the letter (A-J) after the answer's last "answer is" / "answer:" (any case, brackets
  allowed), else the answer's first standalone capital letter A-J. Right when it is the
  reference letter.
- `regex`: the reference is a Python regular expression; right when it is found anywhere in the
  answer (`re.search`).
- `json`: the first JSON value in the answer (the whole trimmed answer, else from its first `{`
  to the matching `}`); the reference is a JSON object; right when every key of the reference
  has an equal value in the answer's object (numbers equal as numbers; other keys are allowed).
- `json_schema`: the same extraction; the reference is a JSON Schema the value must validate
  under.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["SCORERS", "Score", "score", "reference_problem", "DEFAULT_TOLERANCE"]

SCORERS = ("exact", "numeric", "choice", "regex", "json", "json_schema")
DEFAULT_TOLERANCE = 1e-6
_MAX_ANSWER_CHARS = 1 << 16  # a scorer reads at most this much of an answer (answers are bounded anyway)

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_CUE = re.compile(r"answer\s*(?:is|:)", re.IGNORECASE)
_LETTER_AFTER_CUE = re.compile(r"^\s*[:\-]?\s*\**\s*[\(\[]?([A-J])(?![A-Za-z])")
_STANDALONE_LETTER = re.compile(r"(?<![A-Za-z])([A-J])(?![A-Za-z])")


@dataclass(frozen=True)
class Score:
    """One answer scored: right or not, and what the rule extracted (None: nothing to extract)."""

    correct: bool
    extracted: str | None


def _after_last(pattern: re.Pattern[str], text: str) -> str | None:
    ends = [m.end() for m in pattern.finditer(text)]
    return text[ends[-1]:] if ends else None


def _number(answer: str) -> float | None:
    tail = answer.rsplit("####", 1)[1] if "####" in answer else _after_last(_CUE, answer)
    for text, first in ((tail, True), (answer, False)):
        if text is None:
            continue
        found = list(_NUMBER.finditer(text))
        if found:
            pick = found[0] if first else found[-1]
            try:
                return float(pick.group().replace(",", ""))
            except ValueError:
                return None
    return None


def _numeric(answer: str, reference: str, tolerance: float) -> Score:
    value = _number(answer)
    try:
        want = float(reference.replace(",", ""))
    except ValueError:
        return Score(False, None if value is None else repr(value))
    if value is None or not math.isfinite(value):
        return Score(False, None if value is None else repr(value))
    shown = f"{value:g}" if value != int(value) or abs(value) >= 1e16 else str(int(value))
    return Score(abs(value - want) <= tolerance * max(1.0, abs(want)), shown)


def _choice(answer: str, reference: str) -> Score:
    tail = _after_last(_CUE, answer)
    found = _LETTER_AFTER_CUE.match(tail) if tail is not None else None
    if found is None:
        found = _STANDALONE_LETTER.search(answer)
    letter = found.group(1) if found else None
    return Score(letter is not None and letter == reference.strip().upper(), letter)


def _first_json(answer: str) -> Any:
    """The whole trimmed answer as JSON, else the first balanced {...} in it; raises ValueError."""
    text = answer.strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    start = text.find("{")
    while start >= 0:
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    try:
                        return json.loads(text[start:i + 1])
                    except ValueError:
                        break
        start = text.find("{", start + 1)
    raise ValueError("no JSON object in the answer")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _json(answer: str, reference: str, schema: bool) -> Score:
    try:
        value = _first_json(answer)
    except (ValueError, RecursionError):
        return Score(False, None)
    shown = json.dumps(value, sort_keys=True, ensure_ascii=False)
    want = json.loads(reference)
    if schema:
        import jsonschema  # only when an item needs it: the auditor's package stays light

        try:
            jsonschema.validate(value, want)
        except (jsonschema.ValidationError, jsonschema.SchemaError):
            return Score(False, shown)
        return Score(True, shown)
    if not isinstance(value, dict) or not isinstance(want, dict):
        return Score(False, shown)
    return Score(all(k in value and _same(value[k], v) for k, v in want.items()), shown)


def score(scorer: str, reference: str, answer: str, tolerance: float = DEFAULT_TOLERANCE) -> Score:
    """`answer` scored against `reference` by `scorer` (one of SCORERS; see the module docstring).

    Raises ValueError for an unknown scorer or a reference the scorer cannot read (a pattern that
    does not compile, JSON that does not parse): those are the set's faults, said when it loads."""
    answer = answer[:_MAX_ANSWER_CHARS]
    if scorer == "exact":
        trimmed = answer.strip()
        return Score(trimmed == reference.strip(), trimmed)
    if scorer == "numeric":
        return _numeric(answer, reference, tolerance)
    if scorer == "choice":
        return _choice(answer, reference)
    if scorer == "regex":
        try:
            found = re.search(reference, answer)
        except re.error as exc:
            raise ValueError(f"the reference is not a regular expression: {exc}") from None
        return Score(found is not None, None if found is None else found.group())
    if scorer in ("json", "json_schema"):
        return _json(answer, reference, scorer == "json_schema")
    raise ValueError(f"unknown scorer {scorer!r} (one of {', '.join(SCORERS)})")


def reference_problem(scorer: str, reference: str) -> str | None:
    """Why `reference` cannot be scored by `scorer`, or None: said when a set loads, never mid-run."""
    if scorer not in SCORERS:
        return f"unknown scorer {scorer!r} (one of {', '.join(SCORERS)})"
    if scorer == "numeric":
        try:
            if not math.isfinite(float(reference.replace(",", ""))):
                return f"the reference {reference!r} is not a finite number"
        except ValueError:
            return f"the reference {reference!r} is not a number"
    if scorer == "choice" and not re.fullmatch(r"\s*[A-Ja-j]\s*", reference):
        return f"the reference {reference!r} is not a letter A-J"
    if scorer == "regex":
        try:
            re.compile(reference)
        except re.error as exc:
            return f"the reference is not a regular expression: {exc}"
    if scorer in ("json", "json_schema"):
        try:
            want = json.loads(reference)
        except ValueError as exc:
            return f"the reference is not JSON: {exc}"
        if not isinstance(want, dict):
            return "the reference must be a JSON object"
    return None
