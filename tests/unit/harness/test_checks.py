"""After-the-fact checks of answers (JSON under a schema, tool calls), the engine-specific
structured-output fields, and the simulator's minimal valid answers."""

from __future__ import annotations

from typing import Any

import jsonschema
import orjson
import pytest

from harness import check_json, check_tool_call
from harness.engines import structured_fields
from harness.simulator._formats import format_reply, minimal_instance
from workloads import DEFAULT_SCHEMA, DEFAULT_TOOLS

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize("content, finish, category", [
    ('{"n": 3}', "stop", None),
    ('  {"n": 3}', "length", None),  # complete JSON, whatever the finish reason
    ('{"n": "three"}', "stop", "schema_failure"),
    ('{"m": 3}', "stop", "schema_failure"),
    ('{"n": 3', "stop", "schema_failure"),  # ended by itself, unfinished: not honoured
    ('{"n": 3', "length", "truncation"),  # JSON had begun when the budget ran out
    ("Sure! Here is the JSON you asked", "length", "schema_failure"),  # prose to the limit: ignored
])
def test_json_answers(content: str, finish: str, category: str | None) -> None:
    assert check_json(content, finish, SCHEMA)[0] == category


def _call(name: str, arguments: str) -> list[dict[str, Any]]:
    return [{"id": "c", "name": name, "arguments": arguments}]


@pytest.mark.parametrize("content, calls, want, reason", [
    ("", _call("get_weather", '{"city": "Oslo"}'), None, None),
    ("", _call("get_weather", '{"city": "Oslo"}'), "search_library", "expected 'search_library'"),
    ("", [], None, "no tool call"),
    ("", _call("launch_rocket", "{}"), None, "not a declared tool"),
    ("", _call("get_weather", '{"city": '), None, "not JSON"),
    ("", _call("get_weather", '{"town": "Oslo"}'), None, "do not validate"),
    ('<tool_call>{"name": "get_weather"}</tool_call>', [], None, "special tokens leaked"),
])
def test_tool_calls(content: str, calls: list[dict[str, Any]], want: str | None, reason: str | None) -> None:
    category, text = check_tool_call(content, calls, DEFAULT_TOOLS, want)
    assert (category is None) == (reason is None)
    if reason is not None:
        assert category == "tool_failure" and reason in text


@pytest.mark.parametrize("engine, api, key", [
    ("vllm", "chat", "response_format"), ("llama.cpp", "chat", "response_format"),
    ("llama.cpp", "completions", "json_schema"), ("sglang", "completions", "json_schema"),
    ("vllm", "completions", "structured_outputs"), ("tgi", "chat", "response_format"),
    (None, "chat", "response_format"),
])
def test_each_engine_gets_its_own_structured_output_field(engine: str | None, api: Any, key: str) -> None:
    fields, form = structured_fields(SCHEMA, engine, api)
    assert list(fields) == [key] and form
    if engine == "tgi":
        assert fields[key] == {"type": "json", "value": SCHEMA}
    if engine == "sglang":
        assert orjson.loads(fields[key]) == SCHEMA  # SGLang takes the schema as a string


def test_the_simulator_answers_the_bundled_schema_and_tools_validly() -> None:
    jsonschema.validate(minimal_instance(DEFAULT_SCHEMA), DEFAULT_SCHEMA)
    reply = format_reply({"tools": DEFAULT_TOOLS, "tool_choice": {"type": "function",
                                                                  "function": {"name": "search_library"}}})
    assert reply is not None and reply.tool_call is not None and reply.tool_call["name"] == "search_library"
    jsonschema.validate(orjson.loads(reply.tool_call["arguments"]), DEFAULT_TOOLS[1]["function"]["parameters"])
    assert format_reply({"tools": DEFAULT_TOOLS, "tool_choice": "none"}) is None
