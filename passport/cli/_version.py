"""passport's installed version, as `--version` and the peers' result files name it."""

from __future__ import annotations

__all__ = ["version"]


def version() -> str:
    """passport's installed version, or "unknown"."""
    from importlib import metadata

    try:
        return metadata.version("passport")
    except metadata.PackageNotFoundError:
        return "unknown"
