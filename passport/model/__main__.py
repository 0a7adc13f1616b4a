"""`python -m passport.model`: rewrite the committed JSON Schema from the pydantic model."""

from passport.model._schema import SCHEMA_PATH, render_schema

SCHEMA_PATH.write_text(render_schema())
print(f"wrote {SCHEMA_PATH}")
