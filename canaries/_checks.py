"""Checkers: one function per canary kind, from what the engine answered to a verdict.

Each returns a `Check`: passed or not, a category for the validity counts when it failed
(`wrong_answer`, `schema_failure`, `tool_failure`, `truncation`), the reason in words, and what
was expected and found, as shown in the passport. Transport failures never reach a checker;
they are classified from the outcome (`rejection`, `error`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from canaries._sandbox import extract_code, run_python
from canaries._suite import CaseSpec
from harness import SPECIAL_TOKENS, check_json, check_tool_call

__all__ = ["Check", "Answer", "check", "SPECIAL_TOKENS"]



@dataclass(frozen=True)
class Answer:
    """What the engine returned for a case (the last turn's, for multi-turn cases)."""

    content: str
    reasoning: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    n_token_chunks: int
    vectors: list[list[float]] | None = None  # embedding cases: each input's vector, in order sent
    scores: list[tuple[int, float]] | None = None  # rerank cases: (document index, score) by index


@dataclass(frozen=True)
class Check:
    passed: bool
    category: str | None
    reason: str
    expected: str
    actual: str


def _ok(reason: str, expected: str, actual: str) -> Check:
    return Check(True, None, reason, expected, actual)


def _fail(category: str, reason: str, expected: str, actual: str) -> Check:
    return Check(False, category, reason, expected, actual)


def _short(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# The words and numbers of an answer: "The answer is 1,391." ends with "1391".
_WORD = re.compile(r"-?\d[\d,]*(?:\.\d+)?|\w+")


def _final_answer(case: CaseSpec, a: Answer) -> Check:
    """`expect.answer`: the answer's last word or number, whatever phrasing comes before it."""
    want = str(case.expect["answer"])
    words = _WORD.findall(a.content)
    last = words[-1].replace(",", "") if words else ""
    if last.lower() == want.lower():
        return _ok("the final answer is right", want, _short(a.content))
    return _fail("wrong_answer", f"the final answer is {last!r}" if last else "the answer is empty", want,
                 _short(a.content))


def _exact(case: CaseSpec, a: Answer) -> Check:
    if "answer" in case.expect:
        return _final_answer(case, a)
    want = case.expect.get("text")
    if want is None:
        return _fail("wrong_answer", "the case has no reference output: record one from a trusted launch with "
                                     "`passport canary --record FILE`", "a recorded reference", _short(a.content))
    if a.content == want:
        return _ok("output matches the reference exactly", want, a.content)
    at = next((i for i, (x, y) in enumerate(zip(a.content, want)) if x != y), min(len(a.content), len(want)))
    return _fail("wrong_answer", f"output differs from the reference at character {at}", want, a.content)


def _json(case: CaseSpec, a: Answer) -> Check:
    schema = case.schema_ or {}
    expected = f"JSON valid under {json.dumps(schema, sort_keys=True)}"
    category, reason = check_json(a.content, a.finish_reason, schema)
    if category is None:
        return _ok(reason, expected, _short(a.content))
    return _fail(category, reason, expected, _short(a.content))


def _tool(case: CaseSpec, a: Answer) -> Check:
    tools = [t.get("function", {}).get("name") for t in case.tools or []]
    want = case.expect.get("name")
    expected = f"a call of {want or ' or '.join(sorted(str(n) for n in tools))} with valid arguments"
    call = a.tool_calls[0] if a.tool_calls else None
    shown = (f"{call.get('name')}({call.get('arguments')})" if call and not SPECIAL_TOKENS.search(a.content)
             else _short(a.content) or "(empty)")
    category, reason = check_tool_call(a.content, a.tool_calls, case.tools or [], want)
    if category is None:
        return _ok(reason, expected, shown)
    return _fail(category, reason, expected, shown)


def _contains(case: CaseSpec, a: Answer, wanted: list[str]) -> Check:
    missing = [w for w in wanted if w.lower() not in a.content.lower()]
    expected = "an answer containing " + ", ".join(repr(w) for w in wanted)
    if missing:
        return _fail("wrong_answer", f"the answer lacks {', '.join(repr(m) for m in missing)}", expected,
                     _short(a.content))
    return _ok("every expected fact is in the answer", expected, _short(a.content))


def _coding(case: CaseSpec, a: Answer) -> Check:
    result = run_python(extract_code(a.content), case.tests or "", timeout_s=case.timeout_s)
    expected = f"code passing the tests within {case.timeout_s:g} s"
    if result.passed:
        return _ok(f"the tests passed in the sandbox ({result.duration_s:.2f} s)", expected, _short(a.content))
    return _fail("wrong_answer", f"sandbox: {result.reason}", expected, _short(a.content))


def _accounting(case: CaseSpec, a: Answer) -> Check:
    e = case.expect
    problems = []
    if "finish_reason" in e and a.finish_reason != e["finish_reason"]:
        problems.append(f"finish_reason {a.finish_reason!r}, expected {e['finish_reason']!r}")
    if "completion_tokens" in e and a.completion_tokens != e["completion_tokens"]:
        problems.append(f"usage.completion_tokens {a.completion_tokens}, expected {e['completion_tokens']}")
    if a.completion_tokens is not None and a.completion_tokens > case.max_tokens:
        problems.append(f"max_tokens {case.max_tokens} not honoured: {a.completion_tokens} tokens")
    if a.completion_tokens is not None and a.finish_reason == "length" and a.completion_tokens != case.max_tokens:
        problems.append(f"finish_reason length after {a.completion_tokens} of {case.max_tokens} tokens")
    if a.completion_tokens is not None and a.finish_reason == "stop" and a.completion_tokens >= case.max_tokens \
            and "finish_reason" not in e:
        problems.append(f"finish_reason stop at the max_tokens limit ({a.completion_tokens} tokens)")
    if e.get("usage_matches_chunks") and a.completion_tokens != a.n_token_chunks:
        problems.append(f"usage says {a.completion_tokens} tokens, the stream carried {a.n_token_chunks} token chunks")
    if a.completion_tokens is None and e.get("usage", True):
        problems.append("no usage was reported")
    if e.get("reasoning") == "separate" and (not a.reasoning or "<think>" in a.content):
        problems.append("reasoning was not separated from content")
    expected = ", ".join(f"{k}={v}" for k, v in e.items()) or f"at most {case.max_tokens} tokens"
    actual = (f"finish_reason={a.finish_reason}, completion_tokens={a.completion_tokens}, "
              f"token chunks={a.n_token_chunks}")
    if problems:
        category = "truncation" if any("finish_reason" in p for p in problems) else "wrong_answer"
        return _fail(category, "; ".join(problems), expected, actual)
    return _ok("length, usage and stop behaviour as expected", expected, actual)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _embedding(case: CaseSpec, a: Answer) -> Check:
    vectors = a.vectors or []
    need = 2 if case.kind == "embedding_deterministic" else 1 + len(case.inputs or [])
    if len(vectors) != need:
        return _fail("wrong_answer", f"{len(vectors)} vectors came back for {need} inputs", f"{need} vectors",
                     str(len(vectors)))
    if case.kind == "embedding_deterministic":
        least = float(case.expect.get("min_cosine", 0.9999))
        cos = _cosine(vectors[0], vectors[1])
        if cos < least:
            return _fail("wrong_answer", f"the same input embedded twice: cosine {cos:.6f}", f"cosine >= {least}",
                         f"{cos:.6f}")
        return _ok(f"the same input embedded twice: cosine {cos:.6f}", f"cosine >= {least}", f"{cos:.6f}")
    if case.kind == "embedding_semantic":
        margin = float(case.expect.get("margin", 0.0))
        near, far = _cosine(vectors[0], vectors[1]), _cosine(vectors[0], vectors[2])
        actual = f"paraphrase {near:.4f}, unrelated {far:.4f}"
        expected = f"paraphrase closer than unrelated by more than {margin}"
        if near - far <= margin:
            return _fail("wrong_answer", f"the paraphrase is not closer than the unrelated text ({actual})",
                         expected, actual)
        return _ok(f"the paraphrase is closer ({actual})", expected, actual)
    dims = sorted({len(v) for v in vectors})
    norms = [math.sqrt(sum(x * x for x in v)) for v in vectors]
    actual = f"dimension {dims[0] if len(dims) == 1 else dims}, lengths {min(norms):.4f}..{max(norms):.4f}"
    want = case.expect.get("dimension")
    normalized = case.expect.get("normalized")
    expected = ", ".join(["one dimension"] + ([f"dimension {want}"] if want is not None else [])
                         + ([f"normalized {normalized}"] if normalized is not None else []))
    problems = []
    if len(dims) != 1:
        problems.append(f"inputs of different lengths gave vectors of lengths {dims}")
    elif want is not None and dims[0] != int(want):
        problems.append(f"dimension {dims[0]}, expected {want}")
    unit = all(abs(n - 1.0) <= 1e-3 for n in norms)
    if normalized is not None and unit != bool(normalized):
        problems.append("vectors are " + ("" if unit else "not ") + "normalised to length 1, "
                        f"expected {'' if normalized else 'not '}normalised")
    if problems:
        return _fail("wrong_answer", "; ".join(problems), expected, actual)
    return _ok(f"vectors as declared ({actual})", expected, actual)


def _rerank(case: CaseSpec, a: Answer) -> Check:
    scores = a.scores or []
    first = int(case.expect.get("first", 0))
    expected = f"document {first} ranked first of {len(case.inputs or [])}"
    if len(scores) != len(case.inputs or []):
        return _fail("wrong_answer", f"{len(scores)} scores for {len(case.inputs or [])} documents", expected,
                     str(len(scores)))
    best = max(scores, key=lambda pair: pair[1])
    actual = ", ".join(f"{i}: {s:.4f}" for i, s in scores)
    if best[0] != first:
        return _fail("wrong_answer", f"document {best[0]} ranked first, not {first}", expected, actual)
    return _ok(f"document {first} ranked first", expected, actual)


def _transcript(case: CaseSpec, a: Answer) -> Check:
    want = case.expect.get("contains")
    if want is None:
        expected = "a complete transcription (the clip carries no words to check)"
        return _ok("the clip was transcribed to a complete answer", expected, _short(a.content))
    heard = " ".join(_WORD.findall(a.content.lower()))
    said = " ".join(_WORD.findall(str(want).lower()))
    if said not in heard:
        return _fail("wrong_answer", f"the transcript does not contain {want!r}", f"contains {want!r}",
                     _short(a.content))
    return _ok(f"the transcript contains {want!r}", f"contains {want!r}", _short(a.content))


def check(case: CaseSpec, a: Answer) -> Check:
    """The verdict for one case's answer."""
    if case.kind.startswith("embedding_"):
        return _embedding(case, a)
    if case.kind == "rerank_order":
        return _rerank(case, a)
    if case.kind == "transcript":
        return _transcript(case, a)
    if case.kind == "exact":
        return _exact(case, a)
    if case.kind == "json":
        return _json(case, a)
    if case.kind == "tool":
        return _tool(case, a)
    if case.kind == "coding":
        return _coding(case, a)
    if case.kind == "accounting":
        return _accounting(case, a)
    if case.kind == "long_context":
        return _contains(case, a, [n.expect for n in case.needles or []])
    return _contains(case, a, [str(case.expect.get("contains", ""))])
