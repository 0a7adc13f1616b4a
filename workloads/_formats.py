"""The bundled JSON Schema and tools that structured-output and tool-call requests carry by default.

Small on purpose: they fit a short output budget, so a failure means the engine did not honour the
constraint rather than that it ran out of tokens. A spec may declare its own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_SCHEMA", "DEFAULT_TOOLS", "STRUCTURED_INSTRUCTION", "TOOLS_INSTRUCTION"]

DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 80},
        "year": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 3},
    },
    "required": ["title", "year"],
    "additionalProperties": False,
}

DEFAULT_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "search_library", "description": "Search a library catalogue.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 20}},
            "required": ["query"], "additionalProperties": False}}},
]

STRUCTURED_INSTRUCTION = "Answer with a JSON object that follows the schema you were given."
TOOLS_INSTRUCTION = "Use one of the tools you were given to help with the text above."
