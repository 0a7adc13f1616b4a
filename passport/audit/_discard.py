"""Pre-registered discard rules, evaluated per repetition over the raw logs.

The rules come from `declared.json` (see `_declared.py`), written before the first timed
request. A discarded repetition stays in the raw files; `compute_results` leaves its requests
out of every figure and lists it with the rule that discarded it and the value that triggered
it. A rule that cannot be evaluated (e.g. capacity when the engine did not report one) discards
nothing and is listed as not evaluable, with the reason.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from passport.audit._declared import Declarations, DiscardRule
from passport.audit._metrics import SUCCESS_OUTCOMES, distinct_ints, numeric_column, object_column, stat, stat_value
from passport.audit._run_data import RunData
from passport.audit._types import DiscardedFigures, DiscardFigures

__all__ = ["evaluate_discards", "OOM_PATTERN"]

OOM_PATTERN = re.compile(r"out of memory|outofmemory|memoryerror|std::bad_alloc|failed to allocate|oom[- ]kill",
                         re.IGNORECASE)


def _engine_exit_repetitions(data: RunData, rep: np.ndarray) -> set[int]:
    """Repetitions during which the launched engine exited: the last one started before the exit."""
    if data.telemetry is None or not data.telemetry.num_rows:
        return set()
    source, name = object_column(data.telemetry, "source"), object_column(data.telemetry, "name")
    exits = numeric_column(data.telemetry, "t_ns")[(source == "engine") & (name == "exit")]
    start = np.fmin(numeric_column(data.requests, "sent_ns"), numeric_column(data.requests, "intended_ns"))
    starts = {int(r): float(np.nanmin(start[rep == r])) for r in np.unique(rep[np.isfinite(rep)])}
    hit = set()
    for t in exits.tolist():
        begun = [r for r, s in starts.items() if s <= t]
        if begun:
            hit.add(max(begun))
    return hit


def _evaluate(rule: DiscardRule, r: int, data: RunData, rep: np.ndarray, measured: np.ndarray,
              success: np.ndarray, exited: set[int], capacity: int | None) -> tuple[bool, Any, str] | None:
    """(discard?, measured value, message) for one rule and repetition; None: not evaluable."""
    in_rep = rep == r
    m = in_rep & measured
    if rule.kind == "engine_exited":
        hit = r in exited
        return hit, hit, "the launched engine exited during this repetition" if hit else "engine stayed up"
    if rule.kind == "out_of_memory":
        errors = object_column(data.requests, "error")[in_rep]
        failed_oom = sum(1 for e in errors if isinstance(e, str) and OOM_PATTERN.search(e))
        log_oom = r in exited and bool(OOM_PATTERN.search(data.engine_log))
        hit = failed_oom > 0 or log_oom
        why = (f"{failed_oom} request(s) failed with an out-of-memory error" if failed_oom
               else "the engine exited and engine.log reports running out of memory" if log_oom
               else "no out-of-memory error")
        return hit, hit, why
    if rule.kind == "capacity_below_workload":
        return None if capacity is None else _capacity(data, in_rep, capacity)
    if rule.kind == "canary_failed":
        return _canary_failed(data, in_rep)
    n = int(m.sum())
    if rule.kind == "error_rate":
        if n == 0:
            return None
        rate = float((m & ~success).sum()) / n
        assert rule.value is not None
        hit = rate > rule.value if rule.op == ">" else rate >= rule.value
        return hit, round(rate, 6), f"error rate {rate:.2%} of {n} measured requests"
    assert rule.metric is not None and rule.stat is not None and rule.value is not None
    ok = m & success
    if rule.metric == "itl.chunk":
        ids = numeric_column(data.requests, "request_id")[ok]
        parts = [data.gaps_by_request[int(i)] for i in ids.tolist() if int(i) in data.gaps_by_request]
        samples = np.concatenate(parts) if parts else np.zeros(0)
    else:
        samples = data.latencies[rule.metric][ok]
    value = stat_value(stat(samples, with_ci=False), rule.stat)
    if value is None:
        return None
    hit = value > rule.value if rule.op == ">" else value >= rule.value
    return hit, float(value), f"{rule.metric}.{rule.stat} = {value * 1000:.3f} ms over this repetition"


def _canary_failed(data: RunData, in_rep: np.ndarray) -> tuple[bool, Any, str] | None:
    """Canary cases sampled under load whose send falls within the repetition's span."""
    if data.canaries is None or not data.canaries.num_rows:
        return None
    sent, end = numeric_column(data.requests, "sent_ns")[in_rep], numeric_column(data.requests, "end_ns")[in_rep]
    if not np.isfinite(sent).any():
        return None
    lo, hi = float(np.nanmin(sent)), float(np.nanmax(end))
    phase = object_column(data.canaries, "phase")
    c_sent = numeric_column(data.canaries, "sent_ns")
    during = (phase == "under_load") & (c_sent >= lo) & (c_sent <= hi)
    if not during.any():
        return None
    failed = during & (object_column(data.canaries, "verdict") == "fail")
    ids = sorted(set(object_column(data.canaries, "case_id")[failed].tolist()))
    return bool(failed.any()), int(failed.sum()), (f"{int(failed.sum())} of {int(during.sum())} canary cases sent "
                                                   f"during it failed" + (f" ({', '.join(ids)})" if ids else ""))


def _capacity(data: RunData, in_rep: np.ndarray, capacity: int) -> tuple[bool, Any, str]:
    """The repetition's largest request (prompt + max_tokens) against the realized context."""
    prompt = np.fmax(numeric_column(data.requests, "prompt_tokens"),
                     numeric_column(data.requests, "input_tokens_client"))
    need = prompt + np.nan_to_num(numeric_column(data.requests, "max_tokens"), nan=0.0)
    largest = float(np.nanmax(need[in_rep])) if np.isfinite(need[in_rep]).any() else 0.0
    hit = largest > capacity
    return hit, int(largest), (f"largest request needs {int(largest)} tokens; the engine realized {capacity} "
                               "per sequence")


_NOT_EVALUABLE = {"capacity_below_workload": "the engine reported no per-sequence context capacity"}


def evaluate_discards(decl: Declarations, data: RunData) -> DiscardFigures:
    """{"rules", "discarded": [{repetition, rule, measured, message}], "not_evaluable": [{rule, reason}]}."""
    requests = data.requests
    rep = numeric_column(requests, "repetition")
    measured = object_column(requests, "phase") == "measure"
    success = np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES)
    exited = _engine_exit_repetitions(data, rep) if any(
        r.kind in ("engine_exited", "out_of_memory") for r in decl.discard) else set()
    discarded: list[DiscardedFigures] = []
    not_evaluable: dict[str, str] = {}
    for r in distinct_ints(rep[measured]):
        for rule in decl.discard:
            outcome = _evaluate(rule, r, data, rep, measured, success, exited, decl.context_tokens_per_sequence)
            if outcome is None:
                not_evaluable.setdefault(rule.text, _NOT_EVALUABLE.get(rule.kind, "the repetition has no value for it"))
                continue
            hit, value, message = outcome
            if hit:
                discarded.append({"repetition": r, "rule": rule.text, "measured": value, "message": message})
                break
    return {"rules": [r.text for r in decl.discard], "discarded": discarded,
            "not_evaluable": [{"rule": k, "reason": v} for k, v in not_evaluable.items()]}
