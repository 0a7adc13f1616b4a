"""Validity rules: each PASS/FAIL/WARN/SKIP with the measured value, its threshold and a remedy.

The verdict: HOLD if canaries failed and the run was not forced (no timed request was sent);
INCOMPLETE if the run did not finish; INVALID if any rule FAILs; else VALID. WARN and SKIP
never change the verdict, but the report lists them as caveats. Thresholds come from the spec's
`validity` section, declared before the run and echoed in the protocol.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from passport.audit._counters import TOKEN_SLACK_PER_ANSWER, CounterFacts
from passport.audit._counts import Pace
from passport.audit._lag import LagFacts, client_rule, dispatch_lag_rule
from passport.audit._types import CanaryFigures, ResultsFigures, RuleFigures, RuleStatus, ValidityLimits, Verdict

__all__ = ["RunFacts", "evaluate", "verdict_of", "RULES", "SATURATED_PREFIX"]

# How the reason of a run the saturation watch stopped begins (passport.run._saturation): the
# verdict is then SATURATED, not INCOMPLETE or INVALID.
SATURATED_PREFIX = "saturated: "


@dataclass(frozen=True)
class RunFacts:
    """What the rules need besides the results: how the run went and what was declared."""

    complete: bool
    incomplete_reason: str | None
    open_loop: bool
    launched_engine: bool
    git_dirty: bool | None
    exact_lengths: bool
    canaries: CanaryFigures
    forced: bool
    context_needed_tokens: int | None = None
    context_capacity_tokens: int | None = None
    capacity_source: str | None = None
    tokenizer_check: dict[str, Any] | None = None
    offered_rate_per_s: float | None = None
    achieved_rate_per_s: float | None = None
    # Open loop with load.concurrency as its in-flight cap (rules version 2 on): the cap, and
    # (measured requests that found it full at their intended time, measured requests).
    in_flight_cap: int | None = None
    found_cap_full: tuple[int, int] | None = None
    # Workers on other hosts (load.backend: ray): each one's clock offset record
    # (protocol.workers.clocks); None for one host.
    clocks: list[dict[str, Any]] | None = None
    # Rules version 3 on: the client's lags and who was busy, judged by what they distort
    # (`_lag.py`); None: the absolute limits of versions 1 and 2.
    lags: LagFacts | None = None
    # Rules version 3 on: the server's prompt count minus ours, over successful measured requests
    # (min, max, n), for single-turn text workloads; None otherwise.
    input_overhead: tuple[int, int, int] | None = None
    # Rules version 3 on: the declared mean arrival rate of an open loop (load.rate_per_s).
    declared_rate_per_s: float | None = None
    # Rules version 4 on: the engine's own counters around the timed phase against the client's
    # totals (`_counters.py`); None: no bracket was kept (or an older run).
    server_counters: CounterFacts | None = None
    counters_judged: bool = False  # rules version 4 on: a missing bracket is said (SKIP)
    # Rules version 5 on: (the model the run asked for, the ids the server's /v1/models listed, or
    # None when it gave no list) from probes.jsonl; None: not judged (an older run, or no probes).
    model_listing: tuple[str, list[str] | None] | None = None
    calibration_judged: bool = False  # rules version 6 on: the stated calibration against the CPU measured
    cap_is_load: bool = False  # rules version 7 on: a binding in-flight cap is the declared load, said, not failed
    # Rules version 9 on (open loops): the pace completions kept with the schedule, with its
    # sampling interval (`achieved_pace`), judged in place of the first-to-last spans.
    pace: Pace | None = None
    pace_judged: bool = False  # rules version 9 on: a window too short for a pace is said (SKIP)
    # Rules version 10 on, for a run that declared accuracy: its spec's `accuracy` section
    # (max_drop, alpha, on_drop) that the accuracy_drop rule judges results.accuracy by.
    accuracy: dict[str, Any] | None = None


def _rule(name: str, passed: bool, measured: Any, threshold: Any, message: str,
          recommendation: str | None = None, soft: bool = False) -> RuleFigures:
    status: RuleStatus = "PASS" if passed else ("WARN" if soft else "FAIL")
    return {"name": name, "status": status, "measured": measured, "threshold": threshold, "message": message,
            "recommendation": None if passed else recommendation}


def _note(name: str, status: RuleStatus, message: str, measured: Any = None) -> RuleFigures:
    """A rule that could not be judged (SKIP) or needs no threshold."""
    return {"name": name, "status": status, "measured": measured, "threshold": None, "message": message,
            "recommendation": None}


def _run_complete(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    if saturated(f):
        return [_rule("run_complete", False, "saturated", "complete", f"the run stopped early: {f.incomplete_reason}",
                      "the server cannot serve this rate: lower load.rate_per_s; the latencies measured before the "
                      "stop include the growing queue")]
    return [_rule("run_complete", f.complete, "complete" if f.complete else "incomplete", "complete",
                  "the run finished its schedule" if f.complete else f"the run stopped early: {f.incomplete_reason}",
                  "rerun to completion; the partial results cover only what was sent")]


def saturated(f: RunFacts) -> bool:
    """The run was stopped by the saturation watch (load.stop_when_saturated; `passport.run._saturation`)."""
    return not f.complete and (f.incomplete_reason or "").startswith(SATURATED_PREFIX)


def _canaries(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    canary = f.canaries
    if canary["status"] == "not_run":
        return [_note("canaries", "SKIP", f"suite {canary['suite']!r} not run: {canary['reason']}")]
    failed = "; ".join(f"{x['case_id']} ({x['kind']}): {x['reason']}" for x in canary["failures"])
    out = [_rule("canaries", canary["status"] == "passed", canary["status"], "passed",
                 f"canary suite {canary['suite']!r}: {canary['reason']}" + (f": {failed}" if failed else "")
                 + (" (timed anyway: --force)" if canary["forced"] else ""),
                 "fix the engine's correctness before timing it; canaries.parquet has each case's request "
                 "and raw response")]
    under_load = canary["under_load"]
    if under_load is not None:
        failed_cases = "; ".join(f"{x['case_id']}: {x['reason']}" for x in under_load["failures"][:5])
        out.append(_rule(
            "canaries_under_load", under_load["n_failed"] == 0, under_load["n_failed"], 0,
            f"{under_load['n_failed']} of {under_load['n_cases']} canary cases sampled during the timed run failed"
            + (f": {failed_cases}" if failed_cases else ""),
            "the engine answered correctly when idle but not under this load: its speed here is not usable"))
    return out


def _accuracy_drop(r: ResultsFigures, c: dict[str, int | None], f: RunFacts,
                   lim: ValidityLimits) -> list[RuleFigures]:
    """A set whose accuracy fell under load by more than `max_drop`, beyond the chance of load
    changing nothing (its sign test's p under `alpha`, Holm-corrected over the sets judged, so
    four sets are not four chances of a false alarm): WARN, or FAIL with `on_drop: fail`."""
    declared, sets = f.accuracy, r.get("accuracy") or {}
    if declared is None:
        return []
    max_drop, alpha = float(declared["max_drop"]), float(declared["alpha"])
    paired = {name: s["paired"] for name, s in sets.items() if s["paired"] is not None}
    if not paired:
        why = ("no item was answered both alone and under load" if sets else "no accuracy item was answered")
        return [_note("accuracy_drop", "SKIP", f"{why}: accuracy.alone and accuracy.share say what was declared")]
    beyond = _holm_rejected({name: p["p_value"] for name, p in paired.items()}, alpha)
    words, dropped = [], []
    for name, p in paired.items():
        both = sets[name]
        alone, loaded = both["alone"], both["under_load"]
        line = (f"{name}: {_share(alone)} alone, {_share(loaded)} under load over {p['n_pairs']} paired items, "
                f"drop {p['drop']:+.3f} (95 % {p['drop_low']:+.3f}..{p['drop_high']:+.3f}; {p['worse']} worse, "
                f"{p['better']} better; sign test p {p['p_value']:.2g})")
        if p["drop"] > max_drop and name in beyond:
            dropped.append(name)
            shown = p["changed"][:_SHOWN_ITEMS]
            line += (f": right alone, wrong under load: {', '.join(shown)}"
                     + (f" and {p['worse'] - len(shown)} more" if p["worse"] > len(shown) else ""))
        words.append(line)
    message = "; ".join(words)
    threshold = f"drop <= {max_drop:g} or p >= {alpha:g} (Holm over {len(paired)} sets)"
    if not dropped:
        return [_rule("accuracy_drop", True, 0, threshold,
                      f"no set lost accuracy under load beyond chance: {message}", "")]
    return [_rule("accuracy_drop", False, len(dropped), threshold,
                  f"{len(dropped)} of {len(paired)} sets answered worse under load: {message}",
                  "the engine answers differently when loaded (batching, preemption, KV-cache or speculative "
                  "settings): accuracy.parquet has both answers of every item",
                  soft=declared.get("on_drop", "warn") != "fail")]


def _holm_rejected(p_values: dict[str, float], alpha: float) -> set[str]:
    """The names whose p Holm's step-down procedure rejects at family-wise level `alpha`."""
    rejected: set[str] = set()
    ordered = sorted(p_values.items(), key=lambda item: item[1])
    for rank, (name, p) in enumerate(ordered):
        if p >= alpha / (len(ordered) - rank):
            break
        rejected.add(name)
    return rejected


_SHOWN_ITEMS = 5  # items named in the rule's message (results.accuracy.*.paired.changed has 20)


def _share(phase: Any) -> str:
    if phase is None or phase["accuracy"] is None:
        return "n/a"
    return f"{phase['accuracy']:.3f} ({phase['correct']}/{phase['n']})"


def _completed_and_errors(r: ResultsFigures, c: dict[str, int | None], f: RunFacts,
                          lim: ValidityLimits) -> list[RuleFigures]:
    measured, succeeded = c["measured"] or 0, c["succeeded"] or 0
    cut = c.get("interrupted") or 0  # rules version 7 on: cut off by the run's stop, neither failed nor not
    judged = measured - cut
    error_rate = (judged - succeeded) / judged if judged else 0.0
    timeouts = sum(v or 0 for k, v in c.items() if k.startswith("timeouts_"))
    said = "" if "interrupted" not in c else f"; {cut} in flight when the run was stopped, not counted"
    return [
        _rule("min_completed_requests", succeeded >= lim["min_completed_requests"], succeeded,
              lim["min_completed_requests"], f"{succeeded} measured requests succeeded",
              "lengthen load.measure or fix the failures below"),
        _rule("error_rate", error_rate <= lim["max_error_rate"], round(error_rate, 6), lim["max_error_rate"],
              f"{judged - succeeded} of {judged} measured requests failed "
              f"(rejected {c['rejections']}, http {c['http_errors']}, stream {c['stream_errors']}, "
              f"timeouts {timeouts}, client {c['client_errors']}){said}",
              "lower the load, raise timeouts, or inspect requests.parquet `error` for the cause"),
    ]


def _cap_words(f: RunFacts) -> tuple[str, str | None]:
    """What an open loop's in-flight cap adds to the dispatch-lag rule (rules version 2 on): a
    note on how many requests found it full and, when enough did to move the tail, the remedy.
    A request that finds the cap full waits for a slot: that lag is the server's (it was slower
    than the offered rate), not the harness's."""
    if f.in_flight_cap is None or f.found_cap_full is None:
        return "", None
    full, measured = f.found_cap_full
    note = (f"; {full} of {measured} measured requests found the in-flight cap "
            f"(load.concurrency {f.in_flight_cap}) full at their intended time")
    if measured and full / measured >= 0.01:
        return note, (f"the cap, not the harness, held requests back: the server still had {f.in_flight_cap} "
                      "requests in flight when the next was due, so the load was not the declared open loop; "
                      "lower load.rate_per_s below what the server completes, or raise load.concurrency")
    return note, None


def _dispatch_lag(lag_ms: float, f: RunFacts, lim: ValidityLimits) -> RuleFigures:
    """Rules versions 1 and 2: the p99 send lag against an absolute limit."""
    note, cap_remedy = _cap_words(f)
    remedy = ("the harness fell behind its schedule: lower the rate or the in-flight cap, or shard the "
              "client")  # rules version 1's words
    if f.in_flight_cap is not None and f.found_cap_full is not None:
        remedy = cap_remedy or "the harness fell behind its schedule: lower the rate or shard the client"
    return _rule("dispatch_lag", lag_ms <= lim["max_dispatch_lag_p99_ms"], round(lag_ms, 3),
                 lim["max_dispatch_lag_p99_ms"], f"p99 send lag behind the intended time {lag_ms:.3f} ms" + note,
                 remedy)


def _workers_note(client: Any, lim: ValidityLimits) -> str:
    workers = client.get("workers") or []
    if not workers:
        return ""
    busy = [w["worker"] for w in workers if (w["cpu_share_max"] or 0) > lim["max_client_cpu_share"]
            or (w["loop_lag_p99_ms"] or 0) > lim["max_loop_lag_p99_ms"]]
    return (f" (each of {len(workers)} worker processes judged on its own samples"
            + (f"; over the bounds: worker {', '.join(map(str, busy))}" if busy else "") + ")")


def _accounting(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    """Rules version 3 on: a server whose own token counts cannot be true (out of range, negative,
    more than the budget or the stream allow) makes every token figure of the run suspect."""
    wrong = c.get("accounting_errors")
    if wrong is None:
        return []
    return [_rule("server_accounting", wrong == 0, wrong, 0,
                  f"{wrong} measured requests reported token counts that cannot be true (their error in "
                  "requests.parquet says which count and why); they are counted as stream errors" if wrong else
                  "every usage count the server sent was possible",
                  "the endpoint's usage is wrong: do not trust its token figures; check the engine or the proxy in "
                  "front of it")]


def _server_counters(r: ResultsFigures, c: dict[str, int | None], f: RunFacts,
                     lim: ValidityLimits) -> list[RuleFigures]:
    """Rules version 4 on: the engine's own totals over the timed phase against what the client
    recorded (see `_counters.py` for what each bound counts)."""
    if not f.counters_judged:
        return []
    k = f.server_counters
    if k is None:
        return [_note("server_counters", "SKIP", "no engine counters were read around the timed phase (the engine "
                                                 "exposes no requests-finished or tokens-generated counter on its "
                                                 "/metrics, or telemetry was off)")]
    if k.backwards:
        return [_note("server_counters", "SKIP", f"the engine's {', '.join(k.backwards)} went down during the timed "
                                                 "phase: it restarted, so its counters bracket nothing")]
    if k.server_requests is None and k.server_tokens is None and k.not_finite:
        return [_note("server_counters", "SKIP", f"the engine's {', '.join(k.not_finite)} read as NaN or an infinity "
                                                 "(legal in Prometheus's text format, but no count): its counters "
                                                 "bracket nothing")]
    slack = TOKEN_SLACK_PER_ANSWER * k.n_answered
    over: list[str] = []  # the client claims more than the engine did
    under: list[str] = []  # the engine did more than the client accounts for
    said: list[str] = []
    measured: list[str] = []  # engine / client, compactly
    if k.server_requests is not None:
        more = "" if k.possible_requests <= k.sure_requests else (
            f" (up to {k.possible_requests} counting its {k.fan_out} apart, and the failed ones)" if k.fan_out
            else f" (up to {k.possible_requests} with the failed ones)")
        said.append(f"the engine finished {k.server_requests:g} requests, the client recorded {k.sure_requests} "
                    f"answers{more}")
        measured.append(f"requests {k.server_requests:g} / {k.sure_requests}")
        if k.sure_requests > k.server_requests:
            extra = k.sure_requests - k.server_requests
            over.append(f"{extra:g} more answer{'' if extra == 1 else 's'} than the engine finished")
        elif k.server_requests > k.possible_requests:
            extra = k.server_requests - k.possible_requests
            under.append(f"{extra:g} more finished request{'' if extra == 1 else 's'} than the client sent")
    if k.server_tokens is not None:
        if k.sure_tokens is None:
            said.append(f"tokens not compared: {k.n_without_usage} answers carried no usage count")
        else:
            more = "" if k.possible_tokens <= k.sure_tokens else (
                " (any number more with the failed ones)" if k.possible_tokens == float("inf")
                else f" (up to {k.possible_tokens:g} with the failed ones)")
            said.append(f"the engine generated {k.server_tokens:g} tokens, the answers' usage says {k.sure_tokens}"
                        + more)
            measured.append(f"tokens {k.server_tokens:g} / {k.sure_tokens}")
            if k.sure_tokens > k.server_tokens + slack:
                over.append(f"{k.sure_tokens - k.server_tokens:g} more tokens than the engine generated")
            elif k.server_tokens > k.possible_tokens + slack:
                under.append(f"{k.server_tokens - k.possible_tokens:g} more tokens than the client can account for")
    message = "; ".join(said) or "the engine exposed neither counter"
    figure = ", ".join(measured) or None  # engine / client
    if over:
        return [_rule("server_counters", False, figure, "client <= engine",
                      f"{message}: the log claims {' and '.join(over)}",
                      "requests.parquet records work the engine never did: the log was edited, or a proxy in front "
                      "of the engine answers on its own; do not trust this run's figures")]
    if under:
        return [_rule("server_counters", False, figure, "engine <= client + failed + canaries",
                      f"{message}: the engine counted {' and '.join(under)}",
                      "another client shared the server during the timed phase (its figures include that load), or "
                      "rows are missing from requests.parquet; run against an engine no one else uses", soft=True)]
    return [_rule("server_counters", True, figure, "client <= engine <= client + failed + canaries",
                  f"{message}: they agree")]


def _client(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    client = r["client"]
    lag = client["dispatch_lag_p99_ms"]
    if lag is None:
        out = [_note("dispatch_lag", "SKIP", "no request was sent")]
    elif f.lags is not None and f.lags.dispatch is not None:
        out = [dispatch_lag_rule(r, f.lags, f.open_loop, f.offered_rate_per_s, lim, *_cap_words(f))]
    else:
        out = [_dispatch_lag(lag, f, lim)]
    cpu_max, loop_lag = client["cpu_share_max"], client["loop_lag_p99_ms"]
    if cpu_max is None or loop_lag is None:
        return out + [_note("client_not_bound", "SKIP", "no client samples")]
    if f.lags is not None and f.lags.loop is not None:
        workers = len(client.get("workers") or [])
        note = _workers_note(client, lim) if f.lags.cpu_share is None else \
            (f" (the samples of {workers} worker processes together)" if workers else "")
        return out + [client_rule(r, f.lags, f.open_loop, lim, note)]
    bound = cpu_max > lim["max_client_cpu_share"] or loop_lag > lim["max_loop_lag_p99_ms"]
    return out + [_rule(
        "client_not_bound", not bound, f"cpu {cpu_max:.2f}, loop lag p99 {loop_lag:.2f} ms",
        f"cpu <= {lim['max_client_cpu_share']}, loop lag p99 <= {lim['max_loop_lag_p99_ms']} ms",
        ("the client's own CPU and event-loop lag stayed within bounds" if not bound
         else "the client was busy enough to distort timings") + _workers_note(client, lim),
        "run the harness on a quieter machine, lower the load, or shard streams across processes")]


def _worker_place(clock: dict[str, Any]) -> str:
    """A worker as the clock rule names it: its number, and its host where the record has one
    (records from 2026-12-06 on)."""
    return f"{clock['worker']} (host {clock['host']})" if clock.get("host") else str(clock["worker"])


def _clock_offsets(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    """Workers on other hosts run on the coordinator's clock shifted by an estimated offset: what
    compares times across hosts (dispatch lag, the window's rates) carries its uncertainty."""
    if not f.clocks:
        return []
    loose = [k for k in f.clocks if not k.get("bounded")]
    worst_ms = max(max(k.get("uncertainty_ns") or 0, k.get("uncertainty_after_ns") or 0) for k in f.clocks) / 1e6
    return [_rule(
        "clock_offsets", not loose, len(loose), 0,
        f"the clock offsets of {len(f.clocks)} workers were bounded within {worst_ms:.3f} ms before and after the "
        "run" if not loose else
        f"the clock offset of worker(s) {', '.join(_worker_place(k) for k in loose)} could not be bounded within "
        "1 ms (uncertain or moving): their dispatch lag and the window's rates carry it; TTFT, ITL and E2E are "
        "read on one host's clock and do not",
        "run the workers nearer the coordinator (round trips under 2 ms) or on hosts whose clocks are steadier",
        soft=True)]


def _achieved_rate(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    if not f.open_loop:
        return []
    offered, achieved = f.offered_rate_per_s, f.achieved_rate_per_s
    if offered is None or achieved is None:
        return [_note("achieved_rate", "SKIP", "too few measured requests")]
    if f.pace_judged:
        if f.pace is None:
            return [_note("achieved_rate", "SKIP", "too few successful measured requests to read the pace "
                                                   "completions kept with the schedule")]
        return _achieved_pace(r, f, f.pace, offered, lim)
    fraction = achieved / offered
    capped = _cap_held(r, f)
    message = f"completions came at {achieved:.3f} req/s while the schedule offered {offered:.3f} req/s"
    if f.declared_rate_per_s is not None:  # rules version 3: every rate named, the ratio labelled
        message = (f"achieved / offered = {fraction:.3f}: completions came at {achieved:.3f} req/s (first to last "
                   f"completion) while the schedule offered {offered:.3f} req/s (first to last scheduled arrival; the "
                   f"declared {f.declared_rate_per_s:g}/s is the mean its random arrivals approach); the headline "
                   "throughput divides by the whole window, first send to last end")
    if capped is not None:
        return [_rule("achieved_rate", fraction >= lim["min_achieved_rate_fraction"], round(fraction, 4),
                      lim["min_achieved_rate_fraction"], message + capped,
                      "to measure the open loop the rate declares, raise load.concurrency (the cap) or lower "
                      "load.rate_per_s; TTFT, ITL and E2E start at the send, after the slot, and *.sched ones at the "
                      "intended time, with the wait", soft=True)]
    return [_rule("achieved_rate", fraction >= lim["min_achieved_rate_fraction"], round(fraction, 4),
                  lim["min_achieved_rate_fraction"], message,
                  "the server did not keep up with the offered load: the latencies include queueing; "
                  "lower load.rate_per_s to measure below saturation")]


def _achieved_pace(r: ResultsFigures, f: RunFacts, pace: Pace, offered: float,
                   lim: ValidityLimits) -> list[RuleFigures]:
    """Rules version 9 on: fails only when the server fell behind beyond the window's own spread."""
    limit = lim["min_achieved_rate_fraction"]
    high = "no upper bound" if math.isinf(pace.high) else f"{pace.high:.3f}"
    declared = "" if f.declared_rate_per_s is None else (
        f"; the declared {f.declared_rate_per_s:g}/s is the mean its random arrivals approach")
    message = (f"achieved / offered = {pace.fraction:.3f} [{pace.low:.3f}, {high}] (95 %): successful completions "
               f"kept {pace.fraction:.3f} of the schedule's pace, {pace.fraction * offered:.3f} req/s against "
               f"{offered:.3f} req/s offered (first to last scheduled arrival{declared}); the pace is the slope of "
               f"completion time on scheduled time over {pace.succeeded} successful of {pace.measured} measured "
               "requests, so one slow first or last request does not sway it")
    capped = _cap_held(r, f)
    if capped is not None:
        return [_rule("achieved_rate", pace.fraction >= limit, round(pace.fraction, 4), limit, message + capped,
                      "to measure the open loop the rate declares, raise load.concurrency (the cap) or lower "
                      "load.rate_per_s; TTFT, ITL and E2E start at the send, after the slot, and *.sched ones at the "
                      "intended time, with the wait", soft=True)]
    if pace.fraction >= limit:
        return [_rule("achieved_rate", True, round(pace.fraction, 4), limit, message)]
    if pace.high >= limit:
        return [_rule("achieved_rate", False, round(pace.fraction, 4), limit,
                      message + f"; below {limit:g}, but the interval reaches it: this window cannot tell whether "
                      "the server kept up",
                      f"measure more requests (load.measure; {pace.measured} now) or a longer window to tell",
                      soft=True)]
    return [_rule("achieved_rate", False, round(pace.fraction, 4), limit, message,
                  "the server did not keep up with the offered load: the latencies include queueing; "
                  "lower load.rate_per_s to measure below saturation")]


def _cap_held(r: ResultsFigures, f: RunFacts) -> str | None:
    """Rules version 7 on: what a binding in-flight cap did to an open loop, when it held 1 % or
    more of the measured requests: the load the user declared (a rate with a cap, vLLM's
    --request-rate with --max-concurrency), measured and said, never a client fault."""
    if not f.cap_is_load or f.in_flight_cap is None or f.found_cap_full is None:
        return None
    full, measured = f.found_cap_full
    if not measured or full / measured < 0.01:
        return None
    wait: dict[str, Any] = dict(r["metrics"].get("slot_wait") or {})
    shown = "" if not wait.get("n") else (f" (slot_wait p50 {float(wait['p50'] or 0) * 1000:.1f} ms, max "
                                          f"{float(wait['max'] or 0) * 1000:.1f} ms, over {wait['n']} requests)")
    return (f"; the in-flight cap (load.concurrency {f.in_flight_cap}) held {full} of {measured} measured requests "
            f"until a slot was free{shown}: that is the load declared, a rate under a cap, so the shortfall is "
            "said, not failed")


def _engine(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    out = []
    if f.launched_engine:
        restarts = r["engine_restarts"] or 0
        out.append(_rule("engine_alive", restarts == 0, restarts, 0,
                         "the launched engine stayed up" if restarts == 0 else
                         f"the launched engine exited {restarts} time(s) during the run",
                         "see engine.log in the run folder"))
    needed, realized = f.context_needed_tokens, f.context_capacity_tokens
    if realized is None:
        out.append(_note("context_capacity", "SKIP", "the engine did not report its per-sequence context; declare "
                                                     "identity.max_context to check the workload against it",
                         measured=needed))
    elif needed is not None:
        out.append(_rule(
            "context_capacity", needed <= realized, needed, realized,
            f"the longest request needs {needed} tokens (prompt + output); the engine realized {realized} per "
            f"sequence ({f.capacity_source})",
            "shorten workload.input_tokens / output_tokens or give the engine more context per sequence"))
    return out


def _lengths(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    short = c["short_outputs"] or 0
    out = [_rule("output_budget", short == 0, short, 0,
                 f"{short} successful requests returned fewer tokens than their declared output length",
                 "the engine stopped early: enable ignore_eos (decoding.ignore_eos) or accept shorter outputs",
                 soft=True),
           _exact_lengths(f)]
    check = f.tokenizer_check
    if check is not None and check.get("checked"):
        disagree = len(check["disagreements"])
        out.append(_rule(
            "server_tokenizer", disagree == 0, disagree, 0,
            f"the server's /tokenize agreed on {check['agreed']} of {check['checked']} prompts"
            + (f"; first disagreement: {check['disagreements'][0]}" if disagree else ""),
            "the engine counts prompts differently from workload.tokenizer: point it at the served model's "
            "tokenizer (gguf:<file> or its folder)", soft=True))
    return out


def _exact_lengths(f: RunFacts) -> RuleFigures:
    """Our count against the declared lengths, and (rules version 3 on) the server's count
    against ours: a fixed difference is the chat template and special tokens, stated; a varying
    one means the server tokenizes differently."""
    remedy = "set workload.tokenizer to a tokenizer folder or gguf:<file>"
    if not f.exact_lengths:
        return _rule("exact_input_lengths", False, False, True,
                     "no tokenizer: input lengths are approximate (one token per word)", remedy, soft=True)
    message = "input lengths exact under the model's tokenizer"
    over = f.input_overhead
    if over is None:
        return _rule("exact_input_lengths", True, True, True, message, remedy)
    low, high, n = over
    if low == high:
        return _rule("exact_input_lengths", True, True, True,
                     f"{message}; the server counted {low:+d} tokens on each of {n} requests (special tokens such as "
                     "BOS, and on the chat API its template: it processed the declared length plus that)", remedy)
    return _rule("exact_input_lengths", False, f"{low:+d}..{high:+d}", True,
                 f"{message}, but the server counted {low:+d} to {high:+d} tokens more than we did over {n} requests: "
                 "not a fixed template overhead, so its tokenizer is not ours",
                 "point workload.tokenizer at the served model's tokenizer (gguf:<file> or its folder)", soft=True)


def _answer_checks(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    checks = r.get("checks") or {}
    out = []
    for kind, label in (("json_schema", "structured-output answers valid under their JSON Schema"),
                        ("tool_call", "tool calls naming a declared tool with valid arguments")):
        if kind in checks:
            found = checks[kind]
            failed = found["checked"] - found["passed"]
            results_text = ", ".join(f"{k} {v}" for k, v in sorted(found["results"].items()))
            out.append(_rule(
                f"checks_{kind}", failed == 0, failed, 0,
                f"{found['passed']} of {found['checked']} {label} ({results_text})",
                "the engine did not honour the constraint (or ran out of budget): see check_result and "
                "check_reason in requests.parquet", soft=True))
    return out


def _declarations(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    out = []
    discard = r.get("discard")
    if discard is not None:
        gone = discard["discarded"]
        unjudged = "; ".join(f"{d['rule']!r} not evaluable: {d['reason']}" for d in discard["not_evaluable"])
        detail = ", ".join(f"repetition {d['repetition']} by {d['rule']!r} ({d['message']})" for d in gone)
        out.append(_rule(
            "discard_rules", not gone, len(gone), 0,
            (f"discarded {detail}" if gone else f"{len(discard['rules'])} pre-registered rule(s) discarded nothing")
            + (f"; {unjudged}" if unjudged else ""),
            "the results leave the discarded repetitions out; their requests stay in requests.parquet", soft=True))
    if f.git_dirty is not None:
        out.append(_rule("harness_clean", not f.git_dirty, "dirty" if f.git_dirty else "clean", "clean",
                         "the harness source has uncommitted changes" if f.git_dirty
                         else "the harness source matches its git revision",
                         "commit or stash changes so the harness revision identifies the code", soft=True))
    return out


def _model_listed(r: ResultsFigures, c: dict[str, int | None], f: RunFacts, lim: ValidityLimits) -> list[RuleFigures]:
    """Whether the server lists the model the run asked for: an id it does not list may be served
    by another model under that name (or the field ignored), so identity cannot call it probed."""
    if f.model_listing is None:
        return []
    asked, listed = f.model_listing
    if listed is None:
        return [_note("model_listed", "SKIP", f"the server gave no model list; the run asked for {asked!r}, which "
                                              "identity records as declared")]
    shown = ", ".join(repr(m) for m in listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return [_rule("model_listed", asked in listed, asked, "listed by /v1/models",
                  f"the server lists the model the run asked for ({asked!r})" if asked in listed else
                  f"the run asked for {asked!r}, which the server's /v1/models does not list ({shown or 'none'}): "
                  "another model may have answered under that name, so identity.model.id is declared, not probed",
                  "ask for a model the server lists (`passport probe URL` shows them), or declare what the server "
                  "maps the name to under identity:", soft=True)]


# The most CPU the client may measure against what its calibration predicts before the calibration
# is called understated: twice the prediction, plus 5 points of a core for the sampling's noise
# (honest runs measure below the prediction: it includes the pacing's reserve).
CALIBRATION_SLACK = (2.0, 0.05)


def _client_calibration(r: ResultsFigures, c: dict[str, int | None], f: RunFacts,
                        lim: ValidityLimits) -> list[RuleFigures]:
    """Rules version 6 on: the client's CPU share measured during the run against the share its
    stated calibration predicts for this load. A calibration that understates the client's cost
    (stale, from another machine, or an edited cache) overstates the headroom the passport states."""
    headroom = (r.get("client") or {}).get("headroom")
    if not f.calibration_judged or not headroom:
        return []
    measured, predicted = (r.get("client") or {}).get("cpu_share_mean"), headroom["predicted_cpu_share"]
    if measured is None:
        return [_note("client_calibration", "SKIP", "no CPU share of the client was sampled during the run")]
    factor, points = CALIBRATION_SLACK
    limit = factor * predicted + points
    return [_rule("client_calibration", measured <= limit, round(float(measured), 4),
                  f"<= {factor:g} x predicted + {points:g} = {limit:.3f}",
                  f"the client used {measured:.3f} of a core; its calibration predicts {predicted:.3f} for this load"
                  + ("" if measured <= limit else ": the calibration understates this client's cost here (stale, "
                     f"from another machine, or edited), so the headroom it states (x{headroom['factor']:.2f}) is "
                     "overstated"),
                  "re-measure with `passport calibrate` (or delete the calibration cache) and run again", soft=True)]


@dataclass(frozen=True)
class RuleDoc:
    """One validity rule as the documentation states it: since which rules version it is judged,
    what it checks, its threshold (a `validity.*` spec field, or a fixed bound), and whether
    failing it makes the run INVALID (FAIL) or only warns (WARN)."""

    since: int
    checks: str
    threshold: str
    fails: str


# Every rule a passport can list, by id (tests/unit/test_docs.py holds this table against every
# id the rule functions emit; docs/reference/rules.md is generated from it).
RULE_DOCS: dict[str, RuleDoc] = {
    "run_complete": RuleDoc(1, "the run finished its timed phase (not stopped, killed or cut short)", "complete",
                            "FAIL: INCOMPLETE"),
    "canaries": RuleDoc(1, "every canary case passed before timing (or --force timed past failures)",
                        "all cases pass", "FAIL: HOLD"),
    "canaries_under_load": RuleDoc(1, "the canary cases sampled inside the timed phase passed", "0 failed",
                                   "FAIL"),
    "accuracy_drop": RuleDoc(10, "each accuracy set answered as well under load as alone: the drop over items "
                                 "answered both ways, with the exact sign test on the items that changed (Holm over "
                                 "the sets)",
                             "accuracy.max_drop and accuracy.alpha", "WARN (FAIL with accuracy.on_drop: fail)"),
    "model_listed": RuleDoc(5, "the server's /v1/models lists the model the run asked for", "listed", "WARN"),
    "min_completed_requests": RuleDoc(1, "enough measured requests succeeded", "validity.min_completed_requests",
                                      "FAIL"),
    "error_rate": RuleDoc(1, "the share of measured requests that failed", "validity.max_error_rate", "FAIL"),
    "server_accounting": RuleDoc(3, "every usage count the server sent is one it can mean (not negative, not above "
                                    "max_tokens or what the stream carried)", "no impossible count", "FAIL"),
    "server_counters": RuleDoc(4, "the engine's own requests-finished and tokens-generated counters, read around "
                                  "the timed phase, against the client's totals (from rules version 12 a pooling "
                                  "request may count as each of its inputs, or its documents and query)",
                               "client <= engine <= client + failed + canaries",
                               "FAIL when the client claims more (WARN when the engine did more: another client)"),
    "dispatch_lag": RuleDoc(1, "how late sends left against their schedule, judged against the latency they "
                               "distort from rules version 3 on (validity.max_dispatch_lag_p99_ms before)",
                               "validity.max_lag_share of E2E p50, between validity.lag_floor_ms and "
                               "validity.lag_ceiling_ms", "FAIL (WARN above a fifth of the share)"),
    "client_not_bound": RuleDoc(1, "the client (event loop lag, CPU share) did not bound the measurement (from rules "
                                   "version 11 the samples of the measurement windows, the CPU share at its tail "
                                   "quantile; before, every sample, a warm-up's too, and the CPU share's maximum)",
                                "validity.max_loop_lag_p99_ms, validity.max_client_cpu_share",
                                "FAIL (WARN above a fifth of the lag share)"),
    "client_calibration": RuleDoc(6, "the client's measured CPU share against what its stated calibration "
                                     "predicts for the load", "<= 2 x predicted + 0.05", "WARN"),
    "clock_offsets": RuleDoc(1, "each worker's clock offset from the coordinator's was bounded before and after "
                                "the run (workers on other hosts)", "within 1 ms", "WARN"),
    "achieved_rate": RuleDoc(1, "an open loop's successful completions kept the pace of its schedule (from rules "
                                "version 9 the slope of completion time on scheduled time, with its 95 % interval; "
                                "before, the first-to-last spans)", "validity.min_achieved_rate_fraction",
                             "FAIL (from rules version 9 only when the whole interval lies below the limit; WARN when "
                             "the window cannot tell); WARN from rules version 7 when the in-flight cap held the load "
                             "(a rate under a cap, as declared)"),
    "engine_alive": RuleDoc(1, "a launched engine stayed up through the timed phase", "0 exits", "FAIL"),
    "context_capacity": RuleDoc(1, "the workload's longest request fits the context the engine realized",
                                "needed <= realized context", "FAIL"),
    "output_budget": RuleDoc(1, "successful answers reached their declared output length", "0 short", "WARN"),
    "exact_input_lengths": RuleDoc(1, "prompts are as long as declared in the server's own token count",
                                   "server count = declared", "WARN without a tokenizer; FAIL when the counts "
                                   "differ"),
    "server_tokenizer": RuleDoc(3, "the server counts prompts as the client's tokenizer does", "0 tokens apart",
                                "WARN"),
    "discard_rules": RuleDoc(1, "no repetition was discarded by the pre-registered discard rules",
                             "0 discarded", "WARN"),
    "harness_clean": RuleDoc(1, "the harness ran from a clean checkout (its revision says what ran)",
                             "clean", "WARN"),
}


Rule = Callable[[ResultsFigures, dict[str, int | None], RunFacts, ValidityLimits], list[RuleFigures]]
# Every rule, in the order the passport lists them.
RULES: tuple[Rule, ...] = (_run_complete, _canaries, _accuracy_drop, _model_listed, _completed_and_errors, _accounting,
                           _server_counters, _client, _client_calibration, _clock_offsets, _achieved_rate, _engine,
                           _lengths, _answer_checks, _declarations)


def evaluate(results: ResultsFigures, counts: dict[str, int | None], facts: RunFacts,
             limits: ValidityLimits) -> list[RuleFigures]:
    """Apply every rule to the computed results."""
    return [rule for check in RULES for rule in check(results, counts, facts, limits)]


def verdict_of(rules: list[RuleFigures], facts: RunFacts) -> Verdict:
    if facts.canaries["status"] == "failed" and not facts.forced:
        return "HOLD"
    if saturated(facts):
        return "SATURATED"
    if not facts.complete:
        return "INCOMPLETE"
    if any(r["status"] == "FAIL" for r in rules):
        return "INVALID"
    return "VALID"
