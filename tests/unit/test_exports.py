"""Each package's __all__ lists exactly its public (non-underscore) names, as httpx checks."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["passport", "harness", "workloads", "canaries", "harness.simulator"])
def test_all_matches_public_names(package: str) -> None:
    module = importlib.import_module(package)
    public = {n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, type(importlib))}
    assert set(module.__all__) == public - {"annotations"}
