"""Package names loaded on first use (PEP 562), for `harness`, `passport`, `passport.model`,
`passport.judge` and `passport.report`: importing a package costs only what the names used need
(`import passport.audit` and `passport capacity` never load the load generator, pydantic or
matplotlib; a spec validates without the runner)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, home: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`, whose names live in the modules `home` gives."""

    def __getattr__(name: str) -> Any:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(home))

    return __getattr__, __dir__
