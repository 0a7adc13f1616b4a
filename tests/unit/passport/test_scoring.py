"""The accuracy scorers, by their stated extraction rules: hand-written answers with what each rule
must extract, and properties over arbitrary text (a scorer never raises on an answer, and finds a
reference the answer states in the form the rule names)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from passport.audit import SCORERS, reference_problem, score


@pytest.mark.parametrize(("answer", "reference", "extracted", "correct"), [
    ("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72.\n#### 72", "72", "72", True),
    ("She sold 72 clips. #### 71", "72", "71", False),  # the #### line wins over an earlier number
    ("The answer is 1,391.", "1391", "1391", True),  # thousands separators dropped, the full stop ignored
    ("First 3 + 4 = 7, then 7 * 2 = 14", "14", "14", True),  # no cue: the last number
    ("The answer is 98. Next question: what is 5 + 5?", "98", "98", True),  # the first number after the cue
    ("answer: -3.5", "-3.5", "-3.5", True),
    ("It is 0.3333334", "0.3333333", "0.333333", True),  # within the default relative tolerance of 1e-6
    ("no number here", "5", None, False),
])
def test_numeric_extracts_by_the_stated_rule(answer: str, reference: str, extracted: str | None,
                                             correct: bool) -> None:
    found = score("numeric", reference, answer)
    assert found.correct is correct
    if extracted is not None:
        assert found.extracted is not None and float(found.extracted) == pytest.approx(float(extracted), rel=1e-6)
    else:
        assert found.extracted is None


def test_numeric_tolerance_is_relative_to_the_reference_and_absolute_below_one() -> None:
    assert score("numeric", "1000", "1009", tolerance=0.01).correct
    assert not score("numeric", "1000", "1011", tolerance=0.01).correct
    assert score("numeric", "0", "0.009", tolerance=0.01).correct  # max(1, |ref|): absolute near zero


@pytest.mark.parametrize(("answer", "letter"), [
    ("The answer is (B) because it is largest", "B"),
    ("Answer: C", "C"),
    ("C) 652", "C"),
    ("I think A is wrong, so the answer is D.", "D"),  # the cue wins over an earlier letter
    (" E", "E"),
    ("Because Apples are red", None),  # no standalone capital A-J
])
def test_choice_extracts_the_letter(answer: str, letter: str | None) -> None:
    found = score("choice", "D", answer)
    assert found.extracted == letter
    assert found.correct is (letter == "D")


def test_json_requires_every_reference_field_equal_and_allows_others() -> None:
    reference = json.dumps({"name": "Ada", "age": 34})
    assert score("json", reference, 'Here: {"name": "Ada", "age": 34.0, "city": "Oslo"} done').correct
    assert not score("json", reference, '{"name": "Ada", "age": "34"}').correct  # a string is not a number
    assert not score("json", reference, '{"name": "Ada"}').correct
    assert not score("json", reference, "no object").correct
    assert score("json", reference, 'text {"note": "a } in a string", "name": "Ada", "age": 34}').correct


def test_json_schema_validates_the_first_json_value() -> None:
    schema = json.dumps({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}})
    assert score("json_schema", schema, '{"a": 1}').correct
    assert not score("json_schema", schema, '{"a": "one"}').correct


def test_exact_and_regex() -> None:
    assert score("exact", "Paris", "  Paris\n").correct
    assert not score("exact", "Paris", "paris").correct
    assert score("regex", r"(?i)\bwalnut\b", "It is WALNUT.").correct
    assert not score("regex", r"(?i)\bwalnut\b", "walnuts").correct


def test_bad_references_are_named_before_a_run() -> None:
    assert reference_problem("numeric", "seven") is not None
    assert reference_problem("choice", "AB") is not None
    assert reference_problem("regex", "(unclosed") is not None
    assert reference_problem("json", "[1, 2]") is not None
    assert reference_problem("nope", "x") is not None
    assert reference_problem("numeric", "1,391") is None
    with pytest.raises(ValueError, match="unknown scorer"):
        score("nope", "x", "x")


REFERENCES = {"exact": "Paris", "numeric": "42", "choice": "B", "regex": r"\d+", "json": '{"a": 1}',
              "json_schema": '{"type": "object"}'}


@settings(max_examples=300, deadline=None)
@given(scorer=st.sampled_from(SCORERS), answer=st.text(max_size=300))
def test_no_answer_makes_a_scorer_raise(scorer: str, answer: str) -> None:
    found = score(scorer, REFERENCES[scorer], answer)
    assert isinstance(found.correct, bool)


@settings(max_examples=300, deadline=None)
@given(value=st.integers(-10**12, 10**12), before=st.text(alphabet="abc xyz.,:\n", max_size=40),
       grouped=st.booleans())
def test_numeric_finds_a_stated_answer_whatever_comes_before(value: int, before: str, grouped: bool) -> None:
    shown = f"{value:,}" if grouped else str(value)
    assert score("numeric", str(value), f"{before} The answer is {shown}.").correct
    assert score("numeric", str(value), f"{before}\n#### {shown}").correct
