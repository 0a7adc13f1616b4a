"""Figures about what was offered and answered, per traffic shape, from `requests.parquet`.

Part of `results` (schema 1.2), recomputed by `verify` like every other figure; numpy/pyarrow
only. Over measured requests of kept repetitions (the `measured` mask of `compute_results`):

- `lengths`: input tokens as targeted, as our tokenizer counted them and as the server counted
  them (single requests only: a session turn's server count is its whole context), output tokens
  targeted and realized (successful requests), and reasoning tokens apart from content.
- `sessions`: multi-turn sessions started, completed (every planned turn answered) and cut
  short, turns sent and planned, and the context each turn carried (server prompt tokens, or our
  count of the messages) by turn number.
- `checks`: answers validated against their request's JSON Schema or tools, by result.
- `shapes`: per shape (or mix component): requests, outcomes, TTFT and E2E medians.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from passport.audit._metrics import SUCCESS_OUTCOMES, distinct_ints, numeric_column, object_column
from passport.audit._types import (
    CheckFigures,
    Distribution,
    LengthFigures,
    SessionFigures,
    ShapeFigures,
    TrafficFigures,
    TurnContext,
)

__all__ = ["traffic_results"]


def _dist(values: np.ndarray) -> Distribution | None:
    """n, mean and order statistics of the finite values (None when there are none)."""
    v = values[np.isfinite(values)]
    if not len(v):
        return None
    p50, p90, p99 = np.percentile(v, [50, 90, 99]).tolist()
    return {"n": int(len(v)), "mean": float(v.mean()), "p50": p50, "p90": p90, "p99": p99,
            "min": float(v.min()), "max": float(v.max())}


def _column(table: pa.Table, name: str) -> np.ndarray:
    return numeric_column(table, name) if name in table.column_names else np.full(table.num_rows, np.nan)


def _lengths(requests: pa.Table, measured: np.ndarray, success: np.ndarray) -> LengthFigures:
    ok = measured & success
    single = np.isnan(_column(requests, "session"))
    reasoning = _column(requests, "reasoning_tokens")
    client_reasoning = _column(requests, "reasoning_tokens_client")
    reasoning = np.where(np.isfinite(reasoning), reasoning, client_reasoning)
    target_out = _column(requests, "output_tokens_target")
    realized_out = _column(requests, "completion_tokens")
    is_target = object_column(requests, "max_tokens_is_target") == True  # noqa: E712 (None-safe)
    both = ok & is_target & np.isfinite(realized_out)
    return {
        "input_tokens": {
            "target": _dist(_column(requests, "input_tokens_target")[measured]),
            "client": _dist(_column(requests, "input_tokens_client")[measured]),
            "server": _dist(_column(requests, "prompt_tokens")[ok & single]),
        },
        "output_tokens": {
            "target": _dist(target_out[measured]),
            "realized": _dist(realized_out[ok]),
            "met_target_share": float(np.mean(realized_out[both] == target_out[both])) if both.any() else None,
        },
        "reasoning_tokens": _dist(reasoning[ok & (reasoning > 0)]) if np.isfinite(reasoning).any() else None,
    }


def _sessions(requests: pa.Table, measured: np.ndarray, success: np.ndarray) -> SessionFigures | None:
    session = _column(requests, "session")
    rows = measured & np.isfinite(session)
    if not rows.any():
        return None
    rep = _column(requests, "repetition")[rows]
    seq = _column(requests, "seq")[rows]
    turn = _column(requests, "turn")[rows]
    planned = _column(requests, "session_turns")[rows]
    good = success[rows]
    keys = np.stack([rep, seq], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    n = len(unique)
    answered = np.bincount(inverse, weights=good.astype(float), minlength=n)
    planned_by = np.zeros(n)
    np.maximum.at(planned_by, inverse, np.nan_to_num(planned))
    completed = int(np.sum(answered >= planned_by))
    context = _column(requests, "prompt_tokens")[rows]
    context = np.where(np.isfinite(context), context, _column(requests, "context_tokens_client")[rows])
    by_turn: dict[str, TurnContext] = {}
    for t in distinct_ints(turn):
        d = _dist(context[(turn == t) & good])
        if d is not None:
            by_turn[str(t)] = {"n": d["n"], "p50": d["p50"], "max": d["max"]}
    return {"started": n, "completed": completed, "cut_short": n - completed, "turns_sent": int(rows.sum()),
            "turns_planned": int(planned_by.sum()), "context_tokens_by_turn": by_turn}


def _checks(requests: pa.Table, measured: np.ndarray) -> dict[str, CheckFigures] | None:
    if "check" not in requests.column_names:
        return None
    kind = object_column(requests, "check")
    result = object_column(requests, "check_result")
    rows = measured & (kind != None)  # noqa: E711 (object array)
    if not rows.any():
        return None
    out: dict[str, CheckFigures] = {}
    for k in sorted({str(x) for x in kind[rows]}):
        mine = rows & (kind == k)
        counts = {str(r): int(c) for r, c in zip(*np.unique(result[mine].astype(str), return_counts=True))}
        checked = int(sum(c for r, c in counts.items() if r not in ("not_checked", "None")))
        out[k] = {"requests": int(mine.sum()), "checked": checked, "passed": counts.get("passed", 0),
                  "pass_rate": counts.get("passed", 0) / checked if checked else None, "results": counts}
    return out


def _shapes(requests: pa.Table, measured: np.ndarray, success: np.ndarray,
            latencies: dict[str, np.ndarray]) -> dict[str, ShapeFigures] | None:
    if "shape" not in requests.column_names:
        return None
    shape = object_column(requests, "shape")
    rows = measured & (shape != None)  # noqa: E711 (object array)
    if not rows.any():
        return None
    outcome = object_column(requests, "outcome")
    out: dict[str, ShapeFigures] = {}
    for name in sorted({str(x) for x in shape[rows]}):
        mine = rows & (shape == name)
        ok = mine & success
        ttft, e2e = latencies["ttft.any"][ok], latencies["e2e"][ok]
        ttft, e2e = ttft[np.isfinite(ttft)], e2e[np.isfinite(e2e)]
        out[name] = {
            "requests": int(mine.sum()),
            "outcomes": {str(k): int(v) for k, v in zip(*np.unique(outcome[mine].astype(str), return_counts=True))},
            "ttft_p50_s": float(np.median(ttft)) if len(ttft) else None,
            "e2e_p50_s": float(np.median(e2e)) if len(e2e) else None,
        }
    return out


def traffic_results(requests: pa.Table, measured: np.ndarray,
                    latencies: dict[str, np.ndarray]) -> TrafficFigures:
    """`lengths`, `sessions`, `checks` and `shapes` of results (see the module docstring)."""
    success = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES)
    return {"lengths": _lengths(requests, measured, success), "sessions": _sessions(requests, measured, success),
            "checks": _checks(requests, measured), "shapes": _shapes(requests, measured, success, latencies)}
