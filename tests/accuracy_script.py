"""Scripted right answers for accuracy sets: one simulator script rule per item, matching its own
question (the last "Question:" of its prompt, unique in a set) and replying with the reference in
the form its scorer reads, worded as an engine might ("The answer is 98.")."""

from __future__ import annotations

import re
from typing import Any

from canaries import AccuracySet


def _reply(scorer: str, reference: str) -> str:
    if scorer == "numeric":
        return f" The answer is {reference}."
    if scorer == "choice":
        return f" The answer is {reference}."
    if scorer == "regex":
        found = re.search(r"\\b(\w+)\\b", reference)
        assert found is not None, reference
        return f" {found.group(1)}"
    return f" {reference}"


def answer_script(*sets: AccuracySet) -> list[dict[str, Any]]:
    """Rules that answer every item of `sets` right."""
    return [{"match": item.prompt[item.prompt.rindex("Question:"):], "reply": _reply(item.scorer, item.reference)}
            for s in sets for item in s.items]
