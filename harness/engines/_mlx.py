"""MLX (`mlx_lm.server`): known only by its fingerprint `{mlx_lm}-{mlx}-{platform}-{gpu}`, which
also carries its version; nothing else to probe, measure or reset over HTTP."""

from __future__ import annotations

import re

from harness.engines._profile import EngineProfile, ProbeContext

__all__ = ["PROFILE"]


def _probe(p: ProbeContext) -> None:
    if p.fingerprint:
        p.put("engine.version", p.fingerprint.split("-")[0], "system_fingerprint (mlx_lm version)")


PROFILE = EngineProfile(
    name="mlx",
    fingerprint=re.compile(r"^\d+\.\d+[\w.]*-\d+\.\d+[\w.]*-.+-.+$"),  # mlx_lm-mlx-platform-gpu
    probe=_probe,
)
