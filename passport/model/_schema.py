"""The passport's JSON Schema, generated from the pydantic model.

`python -m passport.model` rewrites `passport/model/schema/passport.schema.json`; the test suite
fails when the committed file drifts from the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from passport.model._passport import SCHEMA_VERSION, Passport

__all__ = ["SCHEMA_PATH", "generate_schema", "render_schema"]

SCHEMA_PATH = Path(__file__).parent / "schema" / "passport.schema.json"


def generate_schema() -> dict[str, Any]:
    schema = Passport.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://passport.dev/schema/passport-{SCHEMA_VERSION}.json"
    return schema


def render_schema() -> str:
    return json.dumps(generate_schema(), indent=2, sort_keys=True) + "\n"

