"""The simulator's answers to structured-output and tool requests: a minimal valid instance.

When a request carries a JSON Schema (`response_format` json_schema / json, or llama.cpp's
`json_schema` field) the simulator answers with the smallest JSON the schema accepts; when it
carries `tools` (and tool_choice is not `none`) it calls the named tool, or the first, with the
smallest valid arguments. `ignore_formats` turns this off, as an engine that silently drops the
fields would (vLLM's removed `guided_json`, docs/engines/research.md section 5), so checks can be tested failing.
"""

from __future__ import annotations

from typing import Any

import orjson

from harness.simulator._script import Reply, _pieces

__all__ = ["format_reply", "minimal_instance"]


def minimal_instance(schema: dict[str, Any]) -> Any:
    """The smallest value `schema` accepts, for the common keywords (type, required, enum,
    const, minimum, minLength, minItems)."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: minimal_instance(props.get(name) or {}) for name in schema.get("required") or []}
    if kind == "array":
        return [minimal_instance(schema.get("items") or {}) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", 1)
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return True
    return None


def _schema_of(req: dict[str, Any]) -> dict[str, Any] | None:
    form = req.get("response_format")
    if isinstance(form, dict):
        if form.get("type") == "json_schema":
            inner = form.get("json_schema") or {}
            return inner.get("schema") or form.get("schema") or {}
        if form.get("type") == "json":
            return form.get("value") or {}
    schema = req.get("json_schema")
    if isinstance(schema, str):
        return orjson.loads(schema)  # type: ignore[no-any-return]
    return schema if isinstance(schema, dict) else None


def format_reply(req: dict[str, Any]) -> Reply | None:
    """The reply a structured-output or tool request gets, or None (neither)."""
    tools = req.get("tools") or []
    choice = req.get("tool_choice")
    if tools and choice != "none":
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        tool = next((t for t in tools if t.get("function", {}).get("name") == named), tools[0])
        function = tool.get("function", {})
        arguments = orjson.dumps(minimal_instance(function.get("parameters") or {})).decode()
        return Reply([], {"name": function.get("name", ""), "arguments": arguments})
    schema = _schema_of(req)
    if schema is not None:
        return Reply(_pieces(orjson.dumps(minimal_instance(schema)).decode()))
    return None
