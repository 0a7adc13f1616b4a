"""Everything a passport says that follows from its run folder: the results, the counts, the
canary section, every validity rule with its measured value and status, and the verdict.

One function, `derive`, used twice: by `passport run` to write the passport and by `passport
verify` to check it. Its inputs are the raw files, declared.json, the protocol the passport
records (effective spec, harness, workload facts, canary suite) and the few facts only the run
itself knew (`RunState`: whether it finished and why not, whether the canaries were forced past,
whether the harness launched the engine). numpy and pyarrow only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa

from passport.audit._canaries import canary_counts, canary_figures
from passport.audit._counters import counter_facts
from passport.audit._counts import (
    achieved_pace,
    count_outcomes,
    found_cap_full,
    measured_rows,
    offered_and_achieved_rates,
)
from passport.audit._files import RunSource
from passport.audit._lag import lag_facts
from passport.audit._metrics import SUCCESS_OUTCOMES, numeric_column, object_column
from passport.audit._probes import model_listing
from passport.audit._results import compute_results, read_run
from passport.audit._run_data import RunData
from passport.audit._types import CanaryFigures, ResultsFigures, RuleFigures, ValidityLimits, Verdict
from passport.audit._validity import RunFacts, evaluate, verdict_of
from passport.audit._versions import RULES_KEY

__all__ = ["RunState", "Derived", "derive", "NO_CANARIES"]

NO_CANARIES: CanaryFigures = {
    "status": "not_run", "suite": "none", "reason": "the spec declares canaries: none", "suite_sha256": None,
    "suite_version": None, "n_cases": None, "n_failed": None, "forced": False, "failures": [],
    "largest_context_served_tokens": None, "under_load": None,
}


@dataclass(frozen=True)
class RunState:
    """What only the run knew: whether it finished (and why not), whether it was timed past
    failed canaries (--force), and whether the harness launched the engine."""

    complete: bool
    incomplete_reason: str | None
    forced: bool
    launched_engine: bool


@dataclass(frozen=True)
class Derived:
    results: ResultsFigures
    counts: dict[str, int | None]
    canaries: CanaryFigures
    rules: list[RuleFigures]
    verdict: Verdict
    run: RunData = field(repr=False, compare=False)  # the raw tables they were derived from


def _canaries(table: pa.Table | None, protocol: dict[str, Any],
              state: RunState) -> tuple[CanaryFigures, dict[str, int]]:
    suite = protocol.get("canary_suite")
    if not suite or table is None:
        return NO_CANARIES, {}
    held = any(r["phase"] == "gate" and r["verdict"] != "pass" for r in table.select(["phase", "verdict"]).to_pylist())
    timed = not held or state.forced
    share = float(suite.get("share_under_load") or 0.0)
    figures = canary_figures(table, str(suite["suite"]), suite.get("version"), state.forced,
                             share if share > 0 and timed else None)
    return figures, canary_counts(table)


def _input_overhead(requests: pa.Table, effective: dict[str, Any],
                    discarded: list[int]) -> tuple[int, int, int] | None:
    """(min, max, n) of the server's prompt count minus ours over successful measured requests
    of a single-turn text workload (turns carry history and images carry patches the server
    counts and we do not); None when there is nothing to compare."""
    workload = effective.get("workload") or {}
    if workload.get("sessions") or workload.get("images") or "input_tokens_client" not in requests.column_names:
        return None
    ok = measured_rows(requests, discarded) & np.isin(object_column(requests, "outcome"), SUCCESS_OUTCOMES)
    diff = (numeric_column(requests, "prompt_tokens") - numeric_column(requests, "input_tokens_client"))[ok]
    diff = diff[np.isfinite(diff)]
    return (int(diff.min()), int(diff.max()), len(diff)) if len(diff) else None


def _kept_windows(results: ResultsFigures, discarded: list[int]) -> list[tuple[float, float]]:
    """The measurement windows (start, end ns) of the repetitions no discard rule removed."""
    return [(float(w["start_ns"]), float(w["end_ns"])) for w in results["windows"]
            if w["start_ns"] is not None and w["end_ns"] is not None and w["repetition"] not in discarded]


def derive(source: RunSource, protocol: dict[str, Any], state: RunState) -> Derived:
    """Recompute every derivable figure of a passport (see the module docstring) from a run
    folder or a reader of one."""
    run = read_run(source)  # each raw table read once, for the results and the rules alike
    results = compute_results(run)
    requests = run.requests
    discarded = [d["repetition"] for d in (results["discard"] or {"discarded": []})["discarded"]]
    harness = protocol.get("harness") or {}
    rules_version = int((harness.get("libraries") or {}).get(RULES_KEY, "1"))
    counts = count_outcomes(requests, discarded, accounting=rules_version >= 3, interrupted=rules_version >= 7)
    canaries, canary_count = _canaries(run.canaries, protocol, state)
    counts.update(canary_count)
    declared = run.declared
    effective = protocol["effective"]
    offered, achieved = offered_and_achieved_rates(requests, discarded)
    workload = protocol.get("workload") or {}
    load = effective["load"]
    open_loop = load["pattern"] != "closed"
    cap = load.get("concurrency") if open_loop and rules_version >= 2 else None
    facts = RunFacts(
        complete=state.complete, incomplete_reason=state.incomplete_reason,
        open_loop=open_loop, launched_engine=state.launched_engine,
        git_dirty=harness.get("git_dirty"), exact_lengths=bool(workload.get("exact_lengths")),
        canaries=canaries, forced=state.forced, context_needed_tokens=declared.context_needed_tokens,
        context_capacity_tokens=declared.context_tokens_per_sequence,
        capacity_source=declared.capacity_source, tokenizer_check=workload.get("tokenizer_check"),
        offered_rate_per_s=offered, achieved_rate_per_s=achieved,
        in_flight_cap=cap, found_cap_full=found_cap_full(requests, cap, discarded) if cap else None,
        clocks=(protocol.get("workers") or {}).get("clocks"),
        lags=lag_facts(requests, run.telemetry, discarded, less_connect=rules_version >= 8 and not open_loop,
                       windows=_kept_windows(results, discarded) if rules_version >= 11 else None)
        if rules_version >= 3 else None,
        input_overhead=_input_overhead(requests, effective, discarded) if rules_version >= 3 else None,
        declared_rate_per_s=load.get("rate_per_s") if rules_version >= 3 and open_loop else None,
        server_counters=counter_facts(requests, run.telemetry, run.canaries, run.accuracy,
                                      effective["endpoint"].get("api") if rules_version >= 12 else None)
        if rules_version >= 4 else None,
        counters_judged=rules_version >= 4,
        model_listing=model_listing(run.files) if rules_version >= 5 else None,
        calibration_judged=rules_version >= 6,
        cap_is_load=rules_version >= 7,
        pace=achieved_pace(requests, discarded) if rules_version >= 9 and open_loop else None,
        pace_judged=rules_version >= 9,
        accuracy=effective.get("accuracy") if rules_version >= 10 else None,
    )
    rules = evaluate(results, counts, facts, cast(ValidityLimits, effective["validity"]))
    return Derived(results, counts, canaries, rules, verdict_of(rules, facts), run)
