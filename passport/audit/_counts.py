"""Counts kept apart for the validity section (measured requests only): successes, each failure
class, timeouts by kind, truncations, short outputs, schema and tool failures of checked
answers, rejected attempts a retry replaced (`retries`, runs with raw schema 3); and the offered
against the achieved request rate, and (rules version 9 on) the pace completions kept with the
schedule, with its sampling interval; and how many requests of an open loop found its in-flight
cap full when they were due. numpy and pyarrow only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from passport.audit._canaries import CANARY_COUNT_NAMES
from passport.audit._metrics import SUCCESS_OUTCOMES, numeric_column, object_column, superseded
from passport.audit._trend import Slope, slope

__all__ = ["OUTCOME_CLASSES", "COUNT_NAMES", "ACCOUNTING_PREFIX", "count_outcomes", "offered_and_achieved_rates",
           "Pace", "achieved_pace", "pace_from", "found_cap_full", "measured_rows"]

# The outcome classes of requests.parquet (harness.OUTCOMES writes them; a test keeps both equal).
OUTCOME_CLASSES = ("ok", "truncated", "rejected", "http_error", "timeout", "stream_error", "client_error",
                   "interrupted")
_TIMEOUT_KINDS = ("connect", "first_byte", "stall", "total")
COUNT_NAMES = (("measured", "succeeded", "rejections", "truncations", "short_outputs", "http_errors",
                "stream_errors", "client_errors") + tuple(f"timeouts_{k}" for k in _TIMEOUT_KINDS)
               + ("schema_failures", "tool_failures") + CANARY_COUNT_NAMES + ("retries", "accounting_errors",
                                                                                "interrupted"))
# The error the harness records for a request its stop cut off (harness._runner.INTERRUPTED; a
# test keeps the two equal): raw data before the `interrupted` outcome has it as a client_error.
INTERRUPTED_ERROR = "run interrupted"
# How the harness starts the error of a stream whose server accounting is impossible
# (harness.ACCOUNTING_ERROR; a test keeps the two equal).
ACCOUNTING_PREFIX = "server accounting"


def _in_window(requests: pa.Table, discarded: Sequence[int]) -> np.ndarray:
    """Rows of the measure phase, leaving out repetitions discarded by a pre-registered rule."""
    phase = object_column(requests, "phase")
    kept: np.ndarray = (phase == "measure") & ~np.isin(numeric_column(requests, "repetition"), list(discarded))
    return kept


def measured_rows(requests: pa.Table, discarded: Sequence[int]) -> np.ndarray:
    """Measured requests: in the window, each by its last attempt (see `superseded`)."""
    measured: np.ndarray = _in_window(requests, discarded) & ~superseded(requests)
    return measured


def count_outcomes(requests: pa.Table, discarded: Sequence[int] = (),
                   accounting: bool = False, interrupted: bool = False) -> dict[str, int | None]:
    """Failure counts kept apart (measured requests only); None = not checked by this run.
    `accounting` (rules version 3 on): count the streams whose server accounting was impossible.
    `interrupted` (rules version 7 on): count the requests the run's stop cut off, apart from the
    failures (raw data before the `interrupted` outcome recorded them as client_error "run
    interrupted": those are counted here too, and not as client errors)."""
    outcome = object_column(requests, "outcome")
    kinds = object_column(requests, "timeout_kind")
    m = measured_rows(requests, discarded)
    target = object_column(requests, "max_tokens_is_target")
    completion = numeric_column(requests, "completion_tokens")
    wanted = numeric_column(requests, "max_tokens")
    ok = m & np.isin(outcome, SUCCESS_OUTCOMES)
    short = ok & (target == True) & (completion < wanted)  # noqa: E712 (object array)
    counts: dict[str, int | None] = {
        "measured": int(m.sum()),
        "succeeded": int(ok.sum()),
        "rejections": int((m & (outcome == "rejected")).sum()),
        "truncations": int((m & (outcome == "truncated")).sum()),
        "short_outputs": int(short.sum()),
        "http_errors": int((m & (outcome == "http_error")).sum()),
        "stream_errors": int((m & (outcome == "stream_error")).sum()),
        "client_errors": int((m & (outcome == "client_error")).sum()),
    }
    if interrupted:
        cut = (outcome == "interrupted") | ((outcome == "client_error")
                                            & (object_column(requests, "error") == INTERRUPTED_ERROR))
        counts["interrupted"] = int((m & cut).sum())
        counts["client_errors"] = int((m & (outcome == "client_error") & ~cut).sum())
    for kind in _TIMEOUT_KINDS:
        counts[f"timeouts_{kind}"] = int((m & (outcome == "timeout") & (kinds == kind)).sum())
    has_checks = "check_result" in requests.column_names
    checked = object_column(requests, "check_result") if has_checks else np.full(len(m), None, dtype=object)
    asked_kind = object_column(requests, "check") if has_checks else np.full(len(m), None, dtype=object)
    for name, category, check_kind in (("schema_failures", "schema_failure", "json_schema"),
                                       ("tool_failures", "tool_failure", "tool_call")):
        asked = m & (asked_kind == check_kind)
        counts[name] = int((asked & (checked == category)).sum()) if asked.any() else None
    counts["wrong_answers"] = None
    if "retry_of" in requests.column_names:  # raw schema 3: attempts a retry replaced
        counts["retries"] = int((_in_window(requests, discarded) & superseded(requests)).sum())
    if accounting:
        errors = object_column(requests, "error")
        counts["accounting_errors"] = int(sum(1 for e in errors[m & (outcome == "stream_error")]
                                              if isinstance(e, str) and e.startswith(ACCOUNTING_PREFIX)))
    return counts


def offered_and_achieved_rates(requests: pa.Table,
                               discarded: Sequence[int] = ()) -> tuple[float | None, float | None]:
    """Measured requests: (scheduled arrivals per s over their intended span, successful
    completions per s over their end span). A server that keeps up completes as fast as it is
    offered; one that saturates stretches the completions. Per repetition, then averaged."""
    measured = measured_rows(requests, discarded)
    outcome = object_column(requests, "outcome")
    rep = object_column(requests, "repetition")
    intended = numeric_column(requests, "intended_ns")
    end = numeric_column(requests, "end_ns")
    offered, achieved = [], []
    for r in set(rep[measured].tolist()):
        m = measured & (rep == r)
        ok = m & np.isin(outcome, SUCCESS_OUTCOMES) & np.isfinite(end)
        if m.sum() < 3 or ok.sum() < 3:
            continue
        span_i, span_e = np.nanmax(intended[m]) - np.nanmin(intended[m]), end[ok].max() - end[ok].min()
        if span_i > 0 and span_e > 0:
            offered.append((m.sum() - 1) / (span_i / 1e9))
            achieved.append((ok.sum() - 1) / (span_e / 1e9))
    if not offered:
        return None, None
    return float(np.mean(offered)), float(np.mean(achieved))


@dataclass(frozen=True)
class Pace:
    """The share of an open loop's offered pace its successful completions kept (`achieved_pace`)."""

    fraction: float  # point estimate: 1 for a server that keeps up, below 1 for one that falls behind
    low: float  # 95 % interval of the fraction
    high: float  # math.inf when the window cannot bound it from above
    succeeded: int  # successful measured requests the slope was fitted on
    measured: int


def achieved_pace(requests: pa.Table, discarded: Sequence[int] = ()) -> Pace | None:
    """How fast successful completions followed the schedule, with the window's sampling spread.

    A server that keeps up ends each request a stationary latency after it was due, so its
    completion times rise one for one with the intended times; one that serves only a share f of
    the offered rate builds a queue, and its completions rise 1/f seconds per scheduled second.
    The fraction is the share of measured requests that succeeded (those a stop cut off left
    out) over the least-squares slope of completion time on intended time (within each
    repetition, pooled), its interval from the slope's standard error and Student's t. Unlike
    the first-to-last completion span, which one slow first or last request stretches (30
    requests at 200/s with 50 ms of latency spread read 0.54 on a server that kept up), every
    request weighs in, and a short window says how little it knows. None below three successful
    requests a repetition."""
    outcome = object_column(requests, "outcome")
    measured = measured_rows(requests, discarded) & (outcome != "interrupted")  # cut off by a stop: not judged
    ok = measured & np.isin(outcome, SUCCESS_OUTCOMES)
    intended, end = numeric_column(requests, "intended_ns"), numeric_column(requests, "end_ns")
    ok &= np.isfinite(intended) & np.isfinite(end)
    rep = numeric_column(requests, "repetition")
    groups = [ok & (rep == r) for r in np.unique(rep[ok])]
    return pace_from(slope([intended[g] / 1e9 for g in groups], [end[g] / 1e9 for g in groups]), int(measured.sum()))


def pace_from(fitted: Slope | None, measured: int) -> Pace | None:
    """The pace (see `achieved_pace`) of a fitted slope of successful requests' end time on their
    intended time, out of `measured` requests; None when no slope was read or completions do not
    rise with the schedule."""
    if fitted is None or fitted.value <= 0 or not measured:
        return None
    share = fitted.n / measured
    return Pace(share / fitted.value, share / fitted.high,
                share / fitted.low if fitted.low > 0 else math.inf, fitted.n, measured)


def found_cap_full(requests: pa.Table, cap: int, discarded: Sequence[int] = ()) -> tuple[int, int]:
    """Open loop with an in-flight cap: (measured requests that found `cap` requests in flight at
    their intended time, measured requests). Those waited for a slot, so their dispatch lag is the
    server's slowness under the cap, not the harness's. In flight at t: sent before t, not yet
    ended at t (a request that never ended stays in flight); every phase holds a slot."""
    intended = numeric_column(requests, "intended_ns")
    sent = numeric_column(requests, "sent_ns")
    end = numeric_column(requests, "end_ns")
    rep = object_column(requests, "repetition")
    measured = measured_rows(requests, discarded) & np.isfinite(intended)
    full = 0
    for r in set(rep[measured].tolist()):
        mine = (rep == r) & np.isfinite(sent)
        sends = np.sort(sent[mine])
        ends = np.sort(np.where(np.isfinite(end[mine]), end[mine], np.inf))
        due = intended[measured & (rep == r)]
        in_flight = np.searchsorted(sends, due, side="left") - np.searchsorted(ends, due, side="right")
        full += int((in_flight >= cap).sum())
    return full, int(measured.sum())
