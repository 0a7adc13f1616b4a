"""Request fields that differ by engine: the structured-output field for a JSON Schema."""

from __future__ import annotations

from typing import Any

from harness._openai import Api
from harness.engines._profile import StructuredForm
from harness.engines._registry import profile

__all__ = ["structured_fields"]


def structured_fields(schema: dict[str, Any], engine: str | None, api: Api) -> StructuredForm:
    """(body fields asking for JSON under `schema`, a name of the form used): the engine's own
    field where its profile has one (docs/engines/research.md section 5), else OpenAI's `response_format`
    json_schema, which every engine we know takes on chat (and which the Responses body turns
    into its `text.format`)."""
    found = profile(engine)
    own = (found.structured_output(schema, api) if found is not None and found.structured_output
           and api in ("chat", "completions") else None)
    if own is not None:
        return own
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": "passport_workload", "schema": schema, "strict": True}}}, "response_format json_schema"
