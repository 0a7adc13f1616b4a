"""Accuracy sets: items with exact answers, bundled (generated from a seed, no download) or read
from a user's JSONL, each scored by a stated rule (`passport.audit._scoring`).

Bundled sets, each at difficulty 1-3, suit small models too; every prompt shows two worked
examples of the same kind (drawn apart from the items) and ends in "Answer:", so a base model
on /v1/completions and an instruct model on chat both know the form:

- `arithmetic`: word problems of 2-4 steps (add, take away, multiply) on whole numbers; numeric.
- `choice`: which of 3, 4 or 6 numbers is the largest (closer together as difficulty rises),
  lettered A-F; choice.
- `extraction`: a sentence about a person, with 2-4 fields to return as a JSON object, and a
  distractor sentence from difficulty 2; json (every reference field equal).
- `recall`: a list of 3, 8 or 20 "the code word for <colour> is <word>" lines, then a question
  about one of them; regex (the word, whole, any case).

User sets (`format`, or `auto` from the first line's keys), one JSON object a line:

- `gsm8k`: `question`, `answer` ending in `#### N`: numeric against N; the prompt asks for
  "#### <number>" at the end.
- `mmlu`: `question`, `choices` (2-10 strings), `answer` (index or letter): choice.
- `generic`: `prompt`, `reference`, `scorer` (one of SCORERS), optional `id`, `tolerance`,
  `max_tokens`.

An item's id is stable (the set's name and its position); the set's sha256 is over every item's
prompt, reference, scorer and tolerance, so two passports name the exact items they scored.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from canaries._suite import CanaryError
from passport.audit import DEFAULT_TOLERANCE, SCORERS, reference_problem

__all__ = ["AccuracyItem", "AccuracySet", "GENERATED_SETS", "FORMATS", "load_accuracy_set", "generate_set",
           "read_jsonl_set"]

FORMATS = ("auto", "gsm8k", "mmlu", "generic")
_MAX_SET_BYTES = 64 * 2**20
_NEXT_QUESTION = ("\nQuestion:",)  # the stop of the question-and-answer prompts built here
_NAMES = ("Ada", "Ben", "Chloe", "Dev", "Emma", "Farid", "Grace", "Hugo", "Iris", "Jonas", "Kira", "Liam", "Mona",
          "Nils", "Omar", "Pia", "Quinn", "Rosa", "Sami", "Tara")
_THINGS = ("apples", "marbles", "books", "stamps", "coins", "shells", "pencils", "cards", "buttons", "stickers")
_CITIES = ("Oslo", "Lima", "Porto", "Kyoto", "Dakar", "Quito", "Hanoi", "Perth", "Turin", "Cork", "Riga", "Accra")
_JOBS = ("baker", "nurse", "pilot", "farmer", "teacher", "plumber", "chemist", "tailor", "miner", "judge")
_COLOURS = ("red", "blue", "green", "amber", "violet", "silver", "orange", "teal", "pink", "gold", "grey", "white",
            "black", "brown", "cyan", "lime", "navy", "olive", "plum", "rose", "ruby", "sand", "snow", "jade")
_WORDS = ("falcon", "harbor", "meadow", "lantern", "pepper", "glacier", "walnut", "saddle", "thunder", "velvet",
          "compass", "orchid", "canyon", "ember", "quartz", "willow", "beacon", "cobalt", "juniper", "marble",
          "nectar", "pebble", "raven", "sierra", "tundra", "zephyr", "anchor", "bramble", "cinder", "dune")


@dataclass(frozen=True)
class AccuracyItem:
    """One question: the prompt sent (as the user message on chat, as the prompt on completions),
    the reference, how it is scored, and its output budget."""

    id: str
    prompt: str
    reference: str
    scorer: str
    max_tokens: int
    tolerance: float = DEFAULT_TOLERANCE
    stop: tuple[str, ...] = ()  # stop sequences sent with it (a base model goes on to the next question)


@dataclass(frozen=True)
class AccuracySet:
    """A named set of items; `source` says where it came from (a generator with its parameters,
    or a file); `sha256` identifies its items."""

    name: str
    source: str
    items: tuple[AccuracyItem, ...]

    @property
    def sha256(self) -> str:
        body = [[i.id, i.prompt, i.reference, i.scorer, i.tolerance, i.max_tokens, list(i.stop)] for i in self.items]
        return hashlib.sha256(json.dumps(body, separators=(",", ":")).encode()).hexdigest()


Question = tuple[str, str]  # (question text, reference)


def _arithmetic(rng: random.Random, difficulty: int) -> Question:
    name, things = rng.choice(_NAMES), rng.choice(_THINGS)
    value = rng.randint(3, 20 * difficulty)
    text = [f"{name} has {value} {things}."]
    for _ in range(difficulty + 1):
        kind = rng.choice(("add", "take", "times") if value < 200 else ("add", "take"))
        if kind == "add":
            n = rng.randint(2, 15 * difficulty)
            value += n
            text.append(rng.choice((f"{name} is given {n} more.", f"{name} buys {n} more.")))
        elif kind == "take" and value > 2:
            n = rng.randint(1, value - 1)
            value -= n
            text.append(rng.choice((f"{name} gives away {n}.", f"{name} loses {n}.")))
        else:
            n = rng.randint(2, 3)
            value *= n
            text.append(f"Then the number of {things} {name} has becomes {('twice', 'three times')[n - 2]} as large.")
    text.append(f"How many {things} does {name} have now?")
    return " ".join(text), str(value)


def _choice(rng: random.Random, difficulty: int) -> Question:
    n = (3, 4, 6)[difficulty - 1]
    spread = (500, 60, 12)[difficulty - 1]
    base = rng.randint(100, 900)
    values = rng.sample(range(base, base + spread), n)
    letters = "ABCDEF"[:n]
    options = " ".join(f"{letter}) {v}" for letter, v in zip(letters, values))
    return (f"Which of these numbers is the largest? {options}. Reply with the letter.",
            letters[values.index(max(values))])


def _extraction(rng: random.Random, difficulty: int) -> Question:
    person = {"name": rng.choice(_NAMES), "age": rng.randint(18, 90), "city": rng.choice(_CITIES),
              "job": rng.choice(_JOBS)}
    keys = ("name", "age", "city", "job")[: difficulty + 1]
    sentence = (f"{person['name']} is {person['age']} years old, lives in {person['city']} and works as a "
                f"{person['job']}.")
    if difficulty >= 2:
        other = rng.choice([n for n in _NAMES if n != person["name"]])
        sentence += f" {other}, a friend, is {rng.randint(18, 90)} and lives in {rng.choice(_CITIES)}."
    wanted = {k: person[k] for k in keys}
    return (f"Text: {sentence} Return a JSON object with the keys {', '.join(keys)} about {person['name']} "
            "(age as a number).", json.dumps(wanted, separators=(", ", ": ")))


def _recall(rng: random.Random, difficulty: int) -> Question:
    n = (3, 8, 20)[difficulty - 1]
    colours, words = rng.sample(_COLOURS, n), rng.sample(_WORDS, n)
    lines = " ".join(f"The code word for {c} is {w}." for c, w in zip(colours, words))
    k = rng.randrange(n)
    return f"{lines} What is the code word for {colours[k]}? Reply with the word.", words[k]


_GENERATORS: dict[str, tuple[Callable[[random.Random, int], Question], str, int]] = {
    "arithmetic": (_arithmetic, "numeric", 16),
    "choice": (_choice, "choice", 8),
    "extraction": (_extraction, "json", 48),
    "recall": (_recall, "regex", 8),
}
GENERATED_SETS = tuple(_GENERATORS)


def generate_set(kind: str, items: int, difficulty: int, seed: int, max_tokens: int | None = None,
                 name: str | None = None) -> AccuracySet:
    """`items` questions of a bundled kind at `difficulty` (1-3), the same for the same seed."""
    if kind not in _GENERATORS:
        raise CanaryError(f"accuracy set {kind!r} is neither a bundled set ({', '.join(GENERATED_SETS)}) nor a file")
    make, scorer, budget = _GENERATORS[kind]
    rng, shots_rng = random.Random(f"{kind}:{difficulty}:{seed}"), random.Random(f"{kind}:{difficulty}:{seed}:shots")
    label = name or kind
    out: list[AccuracyItem] = []
    seen: set[str] = set()
    while len(out) < items:
        question, answer = make(rng, difficulty)
        if question in seen:
            if len(seen) > 50 * items:
                raise CanaryError(f"accuracy set {kind!r} at difficulty {difficulty} has fewer than {items} "
                                  "distinct questions")
            continue
        seen.add(question)
        shots: list[str] = []
        while len(shots) < 2:
            shot, shot_answer = make(shots_rng, difficulty)
            if shot != question:
                shots.append(f"Question: {shot}\nAnswer: {shot_answer}")
        prompt = "\n\n".join([*shots, f"Question: {question}\nAnswer:"])
        reference = f"(?i)\\b{answer}\\b" if scorer == "regex" else answer
        out.append(AccuracyItem(f"{label}-{len(out):04d}", prompt, reference, scorer, max_tokens or budget,
                                stop=_NEXT_QUESTION))
    return AccuracySet(label, f"generated: {kind}, difficulty {difficulty}, seed {seed}", tuple(out))


def _letter(value: Any, n: int) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n:
        return "ABCDEFGHIJ"[value]
    if isinstance(value, str) and len(value.strip()) == 1 and value.strip().upper() in "ABCDEFGHIJ"[:n]:
        return value.strip().upper()
    raise ValueError(f"answer {value!r} is not an index or a letter of the {n} choices")


def _from_row(row: dict[str, Any], form: str, index: int, label: str, max_tokens: int) -> AccuracyItem:
    if form == "gsm8k":
        answer = str(row["answer"])
        if "####" not in answer:
            raise ValueError("answer has no '#### N' line")
        reference = answer.rsplit("####", 1)[1].strip().replace(",", "")
        prompt = (f"Solve the problem. End your answer with a line '#### <number>'.\n\nQuestion: {row['question']}\n"
                  "Answer:")
        return AccuracyItem(f"{label}-{index:05d}", prompt, reference, "numeric", max_tokens, stop=_NEXT_QUESTION)
    if form == "mmlu":
        choices = row["choices"]
        if not isinstance(choices, list) or not 2 <= len(choices) <= 10:
            raise ValueError("choices must be a list of 2 to 10 options")
        lines = "\n".join(f"{'ABCDEFGHIJ'[i]}. {c}" for i, c in enumerate(choices))
        prompt = f"{row['question']}\n{lines}\nReply with the letter of the right choice.\nAnswer:"
        return AccuracyItem(f"{label}-{index:05d}", prompt, _letter(row["answer"], len(choices)), "choice", max_tokens,
                            stop=_NEXT_QUESTION)
    scorer = str(row["scorer"])
    reference = row["reference"]
    reference = reference if isinstance(reference, str) else json.dumps(reference)
    tolerance = float(row.get("tolerance", DEFAULT_TOLERANCE))
    if not 0 <= tolerance < float("inf"):
        raise ValueError(f"tolerance {tolerance} is not a finite number >= 0")
    budget = int(row.get("max_tokens", max_tokens))
    if budget < 1:
        raise ValueError("max_tokens must be at least 1")
    item_id = str(row.get("id", f"{label}-{index:05d}"))
    return AccuracyItem(item_id, str(row["prompt"]), reference, scorer, budget, tolerance)


def _form_of(row: dict[str, Any]) -> str:
    if {"prompt", "reference", "scorer"} <= row.keys():
        return "generic"
    if {"question", "choices", "answer"} <= row.keys():
        return "mmlu"
    if {"question", "answer"} <= row.keys():
        return "gsm8k"
    raise ValueError(f"keys {sorted(row)} match no format: gsm8k (question, answer), mmlu (question, choices, "
                     "answer) or generic (prompt, reference, scorer)")


def read_jsonl_set(path: Path, form: str, items: int | None, seed: int, max_tokens: int,
                   name: str | None = None) -> AccuracySet:
    """A user's set from JSONL (see the module docstring); with `items`, that many drawn at random
    (seeded) in file order. Raises CanaryError naming the line and what is wrong."""
    label = name or path.stem
    try:
        if path.stat().st_size > _MAX_SET_BYTES:
            raise CanaryError(f"accuracy set {path}: {path.stat().st_size:,} bytes; a set is at most "
                              f"{_MAX_SET_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CanaryError(f"cannot read accuracy set {path}: {exc}") from None
    out: list[AccuracyItem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("a line must be one JSON object")
            item = _from_row(row, _form_of(row) if form == "auto" else form, len(out), label, max_tokens)
            if item.scorer not in SCORERS:
                raise ValueError(f"unknown scorer {item.scorer!r} (one of {', '.join(SCORERS)})")
            problem = reference_problem(item.scorer, item.reference)
            if problem is not None:
                raise ValueError(problem)
        except KeyError as exc:
            raise CanaryError(f"accuracy set {path}, line {number}: no {exc} field") from None
        except (ValueError, TypeError) as exc:
            raise CanaryError(f"accuracy set {path}, line {number}: {exc}") from None
        out.append(item)
    if not out:
        raise CanaryError(f"accuracy set {path} has no items")
    if len({i.id for i in out}) != len(out):
        raise CanaryError(f"accuracy set {path}: item ids repeat")
    if items is not None and items < len(out):
        keep = sorted(random.Random(f"{label}:{seed}").sample(range(len(out)), items))
        out = [out[k] for k in keep]
    return AccuracySet(label, f"file: {path}", tuple(out))


def load_accuracy_set(source: str, form: str = "auto", items: int | None = None, difficulty: int = 1, seed: int = 0,
                      max_tokens: int | None = None, name: str | None = None) -> AccuracySet:
    """A bundled set by name (generated: `items`, default 50) or a JSONL file by path."""
    path = Path(source).expanduser()
    if path.is_file():
        return read_jsonl_set(path, form, items, seed, max_tokens or 256, name)
    if source in _GENERATORS:
        return generate_set(source, items or 50, difficulty, seed, max_tokens, name)
    if path.suffix or "/" in source:
        raise CanaryError(f"accuracy set file {source} not found")
    raise CanaryError(f"accuracy set {source!r} is neither a bundled set ({', '.join(GENERATED_SETS)}) nor a file")
