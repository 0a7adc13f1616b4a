"""Accuracy sets: the bundled generators' references recomputed independently from the question
text (so a generator that states one number and stores another is caught), determinism by seed,
and the JSONL layouts, each bad line named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canaries import GENERATED_SETS, CanaryError, load_accuracy_set
from passport.audit import score

_STEP = re.compile(r"(is given|buys) (\d+) more|(gives away|loses) (\d+)|becomes (twice|three times) as large")


def _question(prompt: str) -> str:
    return prompt[prompt.rindex("Question:") + len("Question:"):].removesuffix("\nAnswer:").strip()


def _solve_arithmetic(q: str) -> int:
    value = int(re.match(r"\w+ has (\d+)", q).group(1))  # type: ignore[union-attr]
    for m in _STEP.finditer(q):
        if m.group(2):
            value += int(m.group(2))
        elif m.group(4):
            value -= int(m.group(4))
        else:
            value *= 2 if m.group(5) == "twice" else 3
    return value


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_bundled_references_are_right_by_an_independent_reading(difficulty: int) -> None:
    for item in load_accuracy_set("arithmetic", items=60, difficulty=difficulty, seed=5).items:
        q = _question(item.prompt)
        assert len(_STEP.findall(q)) == difficulty + 1
        assert int(item.reference) == _solve_arithmetic(q), q
    for item in load_accuracy_set("choice", items=60, difficulty=difficulty, seed=5).items:
        options = dict(re.findall(r"([A-F])\) (\d+)", _question(item.prompt)))
        assert len(options) == (3, 4, 6)[difficulty - 1]
        assert item.reference == max(options, key=lambda k: int(options[k]))
    for item in load_accuracy_set("extraction", items=60, difficulty=difficulty, seed=5).items:
        q, want = _question(item.prompt), json.loads(item.reference)
        name, age, city = re.match(r"Text: (\w+) is (\d+) years old, lives in (\w+)", q).groups()  # type: ignore[union-attr]
        assert want["name"] == name and want["age"] == int(age)
        assert len(want) == difficulty + 1 and (difficulty < 2 or want["city"] == city)
    for item in load_accuracy_set("recall", items=60, difficulty=difficulty, seed=5).items:
        q = _question(item.prompt)
        colour = re.search(r"What is the code word for (\w+)\?", q).group(1)  # type: ignore[union-attr]
        word = re.search(rf"The code word for {colour} is (\w+)\.", q).group(1)  # type: ignore[union-attr]
        assert score(item.scorer, item.reference, f" {word}").correct
        assert len(re.findall(r"The code word for", q)) == (3, 8, 20)[difficulty - 1]


def test_worked_examples_answer_their_own_questions_and_differ_from_the_item() -> None:
    for item in load_accuracy_set("arithmetic", items=20, seed=2).items:
        blocks = item.prompt.split("\n\n")
        assert len(blocks) == 3
        for shot in blocks[:2]:
            q, a = shot.removeprefix("Question: ").split("\nAnswer: ")
            assert int(a) == _solve_arithmetic(q)
            assert q != _question(item.prompt)


def test_same_seed_same_items_other_seed_other_items() -> None:
    for kind in GENERATED_SETS:
        a, b = load_accuracy_set(kind, items=10, seed=1), load_accuracy_set(kind, items=10, seed=1)
        c = load_accuracy_set(kind, items=10, seed=2)
        assert a.sha256 == b.sha256 and a.items == b.items
        assert a.sha256 != c.sha256
        assert len({i.prompt for i in a.items}) == 10


def _jsonl(tmp_path: Path, rows: list[object], name: str = "set.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_gsm8k_mmlu_and_generic_layouts(tmp_path: Path) -> None:
    gsm = load_accuracy_set(str(_jsonl(tmp_path, [
        {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
         "answer": "48/2 = 24 in May.\n48+24 = 72\n#### 1,072"}], "gsm.jsonl")))
    assert (gsm.name, gsm.items[0].scorer, gsm.items[0].reference) == ("gsm", "numeric", "1072")
    assert "#### <number>" in gsm.items[0].prompt
    mmlu = load_accuracy_set(str(_jsonl(tmp_path, [
        {"question": "2 + 2?", "choices": ["3", "4", "5"], "answer": 1},
        {"question": "Red?", "choices": ["red", "blue"], "answer": "a"}], "mmlu.jsonl")))
    assert [i.reference for i in mmlu.items] == ["B", "A"]
    assert "B. 4" in mmlu.items[0].prompt
    generic = load_accuracy_set(str(_jsonl(tmp_path, [
        {"id": "q1", "prompt": "Say hi", "reference": "hi", "scorer": "exact"},
        {"prompt": "Give {a: 1}", "reference": {"a": 1}, "scorer": "json", "max_tokens": 20}], "gen.jsonl")))
    assert [i.id for i in generic.items] == ["q1", "gen-00001"]
    assert generic.items[1].reference == '{"a": 1}' and generic.items[1].max_tokens == 20


@pytest.mark.parametrize(("rows", "message"), [
    ([{"question": "x", "answer": "no hashes"}], "line 1: answer has no '#### N' line"),
    ([{"prompt": "a", "reference": "b", "scorer": "exact"}, {"prompt": "c", "reference": "d", "scorer": "fuzzy"}],
     "line 2: unknown scorer 'fuzzy'"),
    ([{"question": "q", "choices": ["a"], "answer": 0}], "line 1: choices must be a list of 2 to 10"),
    ([{"question": "q", "choices": ["a", "b"], "answer": 5}], "line 1: answer 5 is not an index"),
    ([{"prompt": "a", "reference": "(", "scorer": "regex"}], "line 1: the reference is not a regular expression"),
    ([{"foo": 1}], "line 1: keys ['foo'] match no format"),
    ([[1, 2]], "line 1: a line must be one JSON object"),
    ([{"id": "a", "prompt": "p", "reference": "r", "scorer": "exact"}] * 2, "item ids repeat"),
])
def test_bad_lines_are_named(tmp_path: Path, rows: list[object], message: str) -> None:
    with pytest.raises(CanaryError, match=re.escape(message)):
        load_accuracy_set(str(_jsonl(tmp_path, rows)))


def test_a_draw_of_items_is_seeded_and_in_file_order(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [{"prompt": f"p{i}", "reference": str(i), "scorer": "numeric"} for i in range(50)])
    a = load_accuracy_set(str(path), items=10, seed=3)
    assert a.items == load_accuracy_set(str(path), items=10, seed=3).items
    numbers = [int(i.reference) for i in a.items]
    assert len(numbers) == 10 and numbers == sorted(numbers)


def test_unknown_names_and_missing_files_say_so() -> None:
    with pytest.raises(CanaryError, match="neither a bundled set"):
        load_accuracy_set("trivia")
    with pytest.raises(CanaryError, match="not found"):
        load_accuracy_set("./nope.jsonl")


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(st.one_of(
    st.text(max_size=40),
    st.dictionaries(st.sampled_from(["prompt", "reference", "scorer", "question", "answer", "choices", "id",
                                     "tolerance", "max_tokens"]),
                    st.one_of(st.text(max_size=10), st.integers(-3, 12), st.lists(st.text(max_size=3), max_size=4),
                              st.sampled_from(["exact", "numeric", "choice", "regex", "json"])),
                    max_size=6).map(json.dumps)), max_size=5))
def test_any_file_loads_or_is_refused_with_a_canary_error(tmp_path_factory: pytest.TempPathFactory,
                                                          lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "set.jsonl"
    path.write_text("\n".join(lines))
    try:
        loaded = load_accuracy_set(str(path))
    except CanaryError:
        return
    assert loaded.items and all(i.max_tokens >= 1 for i in loaded.items)
