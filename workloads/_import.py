"""Your own traffic: request logs in the OpenAI request format, or ShareGPT conversations.

- `openai` (JSONL, one request a line): `messages` (chat) or `prompt`, optional `max_tokens`
  (or `max_completion_tokens`), `tools`, `tool_choice`, `response_format`, `timestamp`
  (seconds, or an ISO 8601 time) and `session_id`. What the harness sends from each line:
  the messages or prompt, tools, tool choice and response format; decoding parameters come
  from the spec's declared policy, never from the log.
- `sharegpt` (a JSON list, or JSONL, of `{"conversations": [{"from": "human"|"gpt", "value":
  ...}]}`): the first human turn is the prompt; the first gpt turn's length under the tokenizer
  is the output budget (the common benchmark convention).

Files are read a line (or an object) at a time and turned into Arrow columns in batches, so
memory grows with what is kept, not with the file. An unreadable line is a WorkloadError
naming the file and the line number.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from workloads._errors import WorkloadError

__all__ = ["ImportSpec", "ImportedRecord", "read_records"]

_BUNDLED = Path(__file__).resolve().parent / "data"
_BODY_FIELDS = ("messages", "prompt", "tools", "tool_choice", "response_format")


class ImportSpec(BaseModel):
    """`workload.source`: a request log to offer instead of synthetic prompts."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    path: str = Field(description="The file (JSONL for openai; JSON or JSONL for sharegpt); "
                                  "`bundled:NAME` is a file shipped in workloads/data/.")
    format: Literal["openai", "sharegpt"] = Field(
        "openai",
        description="The file's layout: openai (a messages list per line) or sharegpt (conversations).",
    )
    limit: int | None = Field(None, ge=1, description="Use at most this many records (from the start).")


@dataclass(frozen=True)
class ImportedRecord:
    """One request from a log: the text it is recorded under, its body fields, budget, time."""

    text: str
    body: dict[str, Any]
    max_tokens: int | None
    timestamp_s: float | None
    session_id: str | None
    reply: str | None = None  # sharegpt: the reference answer (its length is the budget)


def _timestamp(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    raise WorkloadError(f"{where}: timestamp {value!r} is neither seconds nor an ISO 8601 time")


def _text_of(messages: list[Any]) -> str:
    parts = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content parts: keep the text ones
            parts += [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(parts)


def _openai(obj: Any, where: str) -> ImportedRecord:
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object (one request), got {type(obj).__name__}")
    messages, prompt = obj.get("messages"), obj.get("prompt")
    if isinstance(messages, list) and messages:
        text = _text_of(messages)
    elif isinstance(prompt, str):
        text = prompt
    else:
        raise WorkloadError(f"{where}: a request needs `messages` (a non-empty list) or `prompt` (a string)")
    budget = obj.get("max_tokens", obj.get("max_completion_tokens"))
    if budget is not None and (not isinstance(budget, int) or budget < 1):
        raise WorkloadError(f"{where}: max_tokens must be a positive integer (got {budget!r})")
    body = {k: obj[k] for k in _BODY_FIELDS if obj.get(k) is not None}
    session = obj.get("session_id")
    return ImportedRecord(text, body, budget, _timestamp(obj.get("timestamp"), where),
                          None if session is None else str(session))


def _sharegpt(obj: Any, where: str) -> ImportedRecord | None:
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise WorkloadError(f"{where}: expected an object with `conversations` (a list of turns)")
    human = next((t.get("value") for t in turns if isinstance(t, dict) and t.get("from") in ("human", "user")), None)
    reply = next((t.get("value") for t in turns if isinstance(t, dict) and t.get("from") in ("gpt", "assistant")),
                 None)
    if not isinstance(human, str) or not human.strip() or not isinstance(reply, str) or not reply.strip():
        return None  # a conversation without a human turn and an answer offers nothing to replay
    return ImportedRecord(human, {"messages": [{"role": "user", "content": human}], "prompt": human}, None, None,
                          str(obj.get("id")) if obj.get("id") is not None else None, reply)


def _objects(path: Path) -> Iterator[tuple[Any, str]]:
    """(object, "file:line") for each JSONL line, or each element of a top-level JSON list."""
    with path.open("rb") as handle:
        first = handle.read(1)
        while first in (b" ", b"\n", b"\r", b"\t"):
            first = handle.read(1)
        handle.seek(0)
        if first == b"[":  # a JSON list: parsed whole (ShareGPT's usual form)
            try:
                data = json.load(handle)
            except json.JSONDecodeError as exc:
                raise WorkloadError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
            for i, obj in enumerate(data):
                yield obj, f"{path} item {i}"
            return
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield orjson.loads(line), f"{path}:{number}"
            except orjson.JSONDecodeError as exc:
                raise WorkloadError(f"{path}:{number}: not valid JSON ({exc}); fix or remove that line") from None


def read_records(spec: ImportSpec, limit: int | None = None) -> Iterator[ImportedRecord]:
    """The usable records of the log, in file order, at most min(limit, spec.limit)."""
    path = (_BUNDLED / spec.path.removeprefix("bundled:") if spec.path.startswith("bundled:")
            else Path(spec.path).expanduser())
    if not path.is_file():
        raise WorkloadError(f"workload.source.path: {path} does not exist")
    cap = min(x for x in (limit, spec.limit) if x is not None) if (limit or spec.limit) else None
    taken = 0
    for obj, where in _objects(path):
        record = _openai(obj, where) if spec.format == "openai" else _sharegpt(obj, where)
        if record is None:
            continue
        yield record
        taken += 1
        if cap is not None and taken >= cap:
            return
