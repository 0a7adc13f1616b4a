"""Scripted replies for the simulated engine: right or wrong answers on cue, for canary tests.

A script is a list of rules, tried in order against the last user message (chat) or the prompt
(completions); the first whose `match` is a substring decides the reply:

- `reply: TEXT`: stream TEXT (one token per whitespace-separated piece, spaces kept).
- `recall: REGEX` with `reply: TEMPLATE`: search the conversation (every message, or the
  prompt) for REGEX and stream TEMPLATE with `{0}` replaced by its first group; with
  `forget_history` only the last message is searched; no match: "I do not know." (a
  forgotten turn).
- `tool_call: {name: N, arguments: JSON-TEXT}`: stream one tool call as OpenAI deltas, the
  name first and the arguments in two pieces; `content: TEXT` streams text before it.
- `reasoning: TEXT` (with `reply`): stream TEXT as `reasoning_content` deltas before the reply,
  as an engine with a reasoning parser does.

No rule matches: the simulator's usual `tok0 tok1 ...`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Reply", "scripted_reply"]


@dataclass(frozen=True)
class Reply:
    pieces: list[str]
    tool_call: dict[str, str] | None = None
    n_reasoning: int = 0  # the first n pieces are reasoning, not content


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text) or [""]


def scripted_reply(script: list[dict[str, Any]], req: dict[str, Any], chat: bool,
                   forget_history: bool) -> Reply | None:
    """The reply the script gives for a request body, or None (no rule matched)."""
    if chat:
        messages = [m for m in req.get("messages") or [] if isinstance(m, dict)]
        users = [m for m in messages if m.get("role") == "user"]
        last = str(users[-1].get("content", "")) if users else ""
        history = " ".join(str(m.get("content", "")) for m in messages)
    else:
        last = str(req.get("prompt", ""))
        history = last
    if forget_history:
        history = last
    for rule in script:
        if str(rule.get("match", "")) not in last:
            continue
        if "tool_call" in rule:
            return Reply(_pieces(str(rule.get("content", ""))) if rule.get("content") else [], dict(rule["tool_call"]))
        if "recall" in rule:
            found = re.search(str(rule["recall"]), history)
            text = str(rule.get("reply", "{0}")).format(found.group(1)) if found else "I do not know."
            return Reply(_pieces(text))
        thought = _pieces(str(rule["reasoning"])) if rule.get("reasoning") else []
        return Reply(thought + _pieces(str(rule.get("reply", ""))), n_reasoning=len(thought))
    return None
