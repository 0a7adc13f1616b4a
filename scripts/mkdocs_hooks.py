"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages are written from the code before each
build (`scripts/docs_reference.py`), so `mkdocs build --strict` fails on a flag without help text,
a spec field without a description or a validity rule without its documentation, and a page can
never show a flag or field the code no longer has."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_reference  # noqa: E402  (beside this file, not a package)


def on_pre_build(config: Any) -> None:
    docs_reference.write(Path(config["docs_dir"]))
