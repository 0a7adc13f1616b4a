"""Checks of a response against what its request asked for: JSON under a schema, a tool call.

Shared by the runner (every timed request that carried `response_format` or `tools`, recorded
per request) and the canaries (which wrap the result with expected/actual text). A check returns
`(category, reason)`; category None means it passed. Categories: `schema_failure`,
`tool_failure`, and `truncation` when the output is not JSON because the budget ran out.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

__all__ = ["check_json", "check_tool_call", "SPECIAL_TOKENS", "CheckResult"]

CheckResult = tuple[str | None, str]

SPECIAL_TOKENS = re.compile(r"<\|[^|>]{1,40}\|>|</?tool_call>|<start_of_turn>|<end_of_turn>|<eos>|<bos>|\[TOOL_CALLS\]")


def check_json(content: str, finish_reason: str | None, schema: dict[str, Any]) -> CheckResult:
    """Does `content` parse as JSON and validate under `schema`?"""
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        # cut by the budget only if JSON had begun: prose that ran to the limit ignored the constraint
        began = content.lstrip()[:1] in ("{", "[")
        category = "truncation" if finish_reason == "length" and began else "schema_failure"
        return category, (f"output is not JSON ({exc.msg} at {exc.pos}); the engine did not honour the "
                          "constraint it was sent" if category == "schema_failure" else
                          f"output is not JSON ({exc.msg} at {exc.pos}): the output budget ran out first")
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as exc:
        return "schema_failure", f"JSON does not validate: {exc.message}"
    except jsonschema.SchemaError as exc:
        return "schema_failure", f"the declared schema is itself invalid: {exc.message}"
    return None, "output parses and validates against the schema"


def check_tool_call(content: str, tool_calls: list[dict[str, Any]], tools: list[dict[str, Any]],
                    want: str | None = None) -> CheckResult:
    """Is the first streamed tool call a declared tool (`want`, when given) with arguments valid
    under its parameter schema, and is the content free of leaked special tokens?"""
    declared = {t.get("function", {}).get("name"): t.get("function", {}) for t in tools}
    leaked = SPECIAL_TOKENS.findall(content)
    if leaked:
        return "tool_failure", f"special tokens leaked into content: {sorted(set(leaked))}"
    if not tool_calls:
        return "tool_failure", "no tool call was streamed"
    call = tool_calls[0]
    name = call.get("name")
    if name not in declared:
        return "tool_failure", f"called {name!r}, not a declared tool"
    if want is not None and name != want:
        return "tool_failure", f"called {name!r}, expected {want!r}"
    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError as exc:
        return "tool_failure", f"arguments are not JSON ({exc.msg})"
    try:
        jsonschema.validate(arguments, declared[name].get("parameters") or {})
    except jsonschema.ValidationError as exc:
        return "tool_failure", f"arguments do not validate: {exc.message}"
    return None, "the first tool call names a declared tool with valid arguments"
