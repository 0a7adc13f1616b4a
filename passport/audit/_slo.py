"""Service-level objectives: which requests met them, and whether the run did.

A request meets the SLO when it succeeded and each declared target holds for it: its TTFT, TPOT
or E2E within the bound; for `itl.chunk`, the target's percentile of its own gaps within the
bound. A request without the quantity (TPOT of a one-token answer, ITL of a one-chunk answer)
cannot miss that target; a successful request that streamed no token misses a TTFT target.
Failures always miss. The run meets a target when the target's percentile over measured
requests, failures counted as +infinity, is within the bound; goodput counts the requests that
met every target (`compute_results` turns them into rates per window).
"""

from __future__ import annotations

import numpy as np

from passport.audit._declared import SloTarget
from passport.audit._metrics import stat, stat_value
from passport.audit._types import SloTargetFigures

__all__ = ["requests_meeting", "target_results"]


def _per_request_itl(gaps: dict[int, np.ndarray], request_ids: np.ndarray, percentile: float) -> np.ndarray:
    out = np.full(len(request_ids), np.nan)
    for i, rid in enumerate(request_ids.tolist()):
        g = gaps.get(int(rid)) if np.isfinite(rid) else None
        if g is not None and len(g):
            out[i] = float(np.percentile(g, percentile))
    return out


def requests_meeting(targets: tuple[SloTarget, ...], latencies: dict[str, np.ndarray], success: np.ndarray,
                     gaps: dict[int, np.ndarray], request_ids: np.ndarray) -> np.ndarray:
    """Per row of the requests table: True when the request succeeded and met every target."""
    meets = success.copy()
    for t in targets:
        values = (_per_request_itl(gaps, request_ids, t.percentile) if t.metric == "itl.chunk"
                  else latencies[t.metric])
        missing_ok = t.metric in ("tpot", "itl.chunk")
        with np.errstate(invalid="ignore"):
            ok = np.where(np.isfinite(values), values <= t.bound_s, missing_ok)
        meets &= ok
    return meets


def _target_value(t: SloTarget, latencies: dict[str, np.ndarray], ok: np.ndarray, n_failed: int,
                  pooled_itl: np.ndarray) -> float | None:
    samples = pooled_itl if t.metric == "itl.chunk" else latencies[t.metric][ok]
    return stat_value(stat(samples, n_failed, with_ci=False), t.stat)


def target_results(targets: tuple[SloTarget, ...], latencies: dict[str, np.ndarray], ok: np.ndarray,
                   n_failed: int, pooled_itl: np.ndarray) -> list[SloTargetFigures]:
    """Each target with its measured run-level value (failures as +inf) and whether it was met."""
    out: list[SloTargetFigures] = []
    for t in targets:
        value = _target_value(t, latencies, ok, n_failed, pooled_itl)
        out.append({"name": t.name, "bound_s": t.bound_s, "measured_s": value,
                    "met": value is not None and value <= t.bound_s})
    return out
