"""Modules of the optional extras, imported through one guard.

passport's base install carries everything a run, a verify, a gate or a ledger needs; a few
features need a module of a named extra (`pip install 'passport[ray]'` for `load.backend: ray`,
`passport[gguf-convert]` to convert a GGUF's tokenizer once). Every import of such a module goes
through `require`, so a missing one is a `MissingModuleError` that names the extra and the
feature, never a `ModuleNotFoundError` traceback. `EXTRA_MODULES` is the list the declared-imports
test holds the code to: a third-party module imported anywhere in the shipped packages is a base
dependency or listed here. Standard library only.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from passport._errors import MissingModuleError

__all__ = ["EXTRA_MODULES", "require"]

# top-level module -> the extra of pyproject.toml that installs it
EXTRA_MODULES: dict[str, str] = {"ray": "ray", "torch": "gguf-convert"}


def require(module: str, feature: str) -> ModuleType:
    """`module` imported, or MissingModuleError saying which extra `feature` needs."""
    top = module.split(".")[0]
    extra = EXTRA_MODULES.get(top)
    if extra is None:
        raise ValueError(f"{top!r} is not a module of an optional extra (passport._optional.EXTRA_MODULES)")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingModuleError(
            f"{feature} needs the module {top!r}, which is not installed ({exc}): "
            f"pip install 'passport[{extra}]' (or `pip install {top}`) in the environment passport runs from"
        ) from None
