"""The exact canary's `answer` expectation: the last word or number, whatever came before it."""

from __future__ import annotations

import pytest

from canaries import CaseSpec
from canaries._checks import Answer, check

CASE = CaseSpec(id="arith", kind="exact", prompt="What is 17 x 23?", expect={"answer": "391"})


def _answer(content: str) -> Answer:
    return Answer(content, "", [], "stop", 10, 5, 5)


@pytest.mark.parametrize("content", ["391", "391.", "The answer is 391.", "17 x 23 = 391\n", "**391**"])
def test_any_phrasing_ending_in_the_answer_passes(content: str) -> None:
    assert check(CASE, _answer(content)).passed


@pytest.mark.parametrize("content, said", [
    ("381", "the final answer is '381'"),
    ("391 is wrong, it is 381", "the final answer is '381'"),
    ("", "the answer is empty"),
    ("tok0 tok1 tok2", "the final answer is 'tok2'"),
])
def test_a_wrong_last_answer_fails_naming_it(content: str, said: str) -> None:
    result = check(CASE, _answer(content))
    assert not result.passed and result.reason == said


def test_thousands_separators_and_case_are_ignored() -> None:
    big = CaseSpec(id="big", kind="exact", prompt="?", expect={"answer": "1391"})
    word = CaseSpec(id="word", kind="exact", prompt="?", expect={"answer": "Teal"})
    assert check(big, _answer("It is 1,391.")).passed and check(word, _answer("teal")).passed
