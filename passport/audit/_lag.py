"""The client's own lag judged by what it distorts (validity rules version 3 on).

A send behind its schedule (dispatch lag) and an event loop that wakes late (loop lag) matter in
proportion to the latencies they distort, not in absolute milliseconds: 30 ms on 4 s TTFTs moves
them by under 1 %, 1 ms on 5 ms TTFTs by 20 %. So each is compared with the latency it distorts:

- dispatch lag, closed loop: a late send leaves a user idle, so the load falls short of the
  declared concurrency by lag / E2E: judged against E2E p50;
- dispatch lag, open loop: a late send moves an arrival, judged against the smaller of the
  schedule's mean gap (1 / offered rate) and TTFT p50;
- loop lag: a chunk read late shifts the time stamped on it: judged against TTFT p50 for the
  verdict, and against ITL p50 for a warning (the ITL tail carries up to the lag; TPOT and E2E
  percentiles hardly move).

A lag FAILs above `max_lag_share` of that latency (default 10 %), clamped to an absolute floor
(`lag_floor_ms`: below it nothing fails) and ceiling (`lag_ceiling_ms`: above it everything
fails), and WARNs above a fifth of that share or above the absolute limits
(`max_dispatch_lag_p99_ms`, `max_loop_lag_p99_ms`), naming the share. The lag is read at the
quantile with at least `TAIL_SAMPLES` samples above it (p99 from 500 samples on; p69 of 16), so
a handful of requests is not judged by its maximum. Whether the loop lagged because of this
process (its CPU share) or other processes on the machine (the time the loop's thread waited
for a CPU, from /proc/thread-self/schedstat, sampled as `run_wait_share`, set against the loop
lag of the same intervals) is measured and said, with the fix that fits the load pattern.
numpy and pyarrow only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from passport.audit._counts import measured_rows
from passport.audit._metrics import numeric_column, object_column, send_lag_ns
from passport.audit._types import ResultsFigures, RuleFigures, RuleStatus, ValidityLimits

__all__ = ["TAIL_SAMPLES", "LagFacts", "lag_facts", "tail_quantile", "dispatch_lag_rule", "client_rule"]

TAIL_SAMPLES = 5
# Waiting for a CPU this share of the time (or more) names other processes as the cause.
_CONTENDED = 0.05
# Using this share of one core (or more) names this process as the cause.
_BUSY = 0.5


def tail_quantile(n: int) -> float:
    """The quantile with at least TAIL_SAMPLES of n samples above it, from p50 to p99."""
    return min(0.99, max(0.5, 1.0 - TAIL_SAMPLES / n)) if n else 0.99


@dataclass(frozen=True)
class Lag:
    """A lag read at its tail quantile: value (ms), the quantile, and the number of samples."""

    ms: float
    q: float
    n: int

    @property
    def label(self) -> str:
        return f"p{self.q * 100:.3g} {self.ms:.2f} ms (n={self.n})"


def _tail(values_ms: np.ndarray) -> Lag | None:
    values_ms = values_ms[np.isfinite(values_ms)]
    if not len(values_ms):
        return None
    q = tail_quantile(len(values_ms))
    return Lag(float(np.quantile(values_ms, q)), q, len(values_ms))


@dataclass(frozen=True)
class LagFacts:
    """What rules version 3 reads beside the results: the lags at their tail quantile, and who
    was busy (this process's CPU share, the loop thread's wait for a CPU)."""

    dispatch: Lag | None
    loop: Lag | None
    cpu_share_mean: float | None
    run_wait_share: float | None
    # Of the loop lag in the samples at or above its tail quantile, the share the loop's thread
    # spent waiting for a CPU in the same intervals (None: no run-queue samples).
    wait_explains: float | None = None
    less_connect: bool = False  # the dispatch lags are less each new connection's setup (rules version 8)
    # Rules version 11 on: the client's samples are those of the measurement windows, and the CPU
    # share is read at its tail quantile (a Lag whose `ms` holds a share of a core) beside the
    # windows' maximum; None: every sample is judged by results' maximum, as before.
    cpu_share: Lag | None = None
    cpu_share_max: float | None = None


def _wait_explains(t_ns: np.ndarray, worker: np.ndarray, name: np.ndarray, value: np.ndarray,
                   tail_ms: float) -> float | None:
    """Of the loop lag in samples at or above `tail_ms`, the share waiting for a CPU explains:
    each run-queue sample is a share of its interval (the gap since the previous sample)."""
    lagged: dict[tuple[float, float], float] = {}
    for t, w, v in zip(t_ns[name == "loop_lag_ms"], worker[name == "loop_lag_ms"], value[name == "loop_lag_ms"]):
        if v >= tail_ms and v > 0:
            lagged[(w, t)] = v
    waits = name == "run_wait_share"
    if not waits.any() or not lagged:
        return None
    explained = 0.0
    for w in set(worker[waits].tolist()):
        mine = waits & (worker == w)
        order = np.argsort(t_ns[mine])
        times, shares = t_ns[mine][order], value[mine][order]
        gaps_ms = np.diff(times, prepend=times[0] - (np.median(np.diff(times)) if len(times) > 1 else 1e8)) / 1e6
        for t, share, gap_ms in zip(times, shares, gaps_ms):
            lag = lagged.get((w, t))
            if lag is not None:
                explained += min(lag, float(share * gap_ms))
    return explained / sum(lagged.values())


def _in_windows(t_ns: np.ndarray, worker: np.ndarray, windows: Sequence[tuple[float, float]]) -> np.ndarray:
    """The samples whose interval lies mostly inside a measurement window: a sample at t covers
    the time since its worker's previous one (its first, the worker's median gap), so its middle
    must fall in [start, end]."""
    middle = np.empty(len(t_ns))
    for w in np.unique(worker):
        mine = np.flatnonzero(worker == w)
        times = np.unique(t_ns[mine])  # each sample time once: its CPU share, loop lag and wait share
        gaps = np.diff(times)
        before = np.concatenate([[float(np.median(gaps)) if len(gaps) else 0.0], gaps])
        middle[mine] = t_ns[mine] - before[np.searchsorted(times, t_ns[mine])] / 2
    inside = np.zeros(len(t_ns), dtype=bool)
    for start, end in windows:
        inside |= (middle >= start) & (middle <= end)
    return inside


def lag_facts(requests: pa.Table, telemetry: pa.Table | None, discarded: Sequence[int],
              less_connect: bool = False, windows: Sequence[tuple[float, float]] | None = None) -> LagFacts:
    """The lags of measured requests (dispatch) and of every client sample (loop), and who was
    busy: this process's mean CPU share, the loop thread's mean wait for a CPU, and how much of
    the worst loop lags that wait explains. `less_connect` (rules version 8 on, closed loops): a
    request's lag less its new connection's setup (`connect_ns`: the server's accept, as the
    `dispatch_lag` metric has it), which a closed loop's user spends connecting just before the
    send; a thousand users connecting at once to a server whose accept queue overflows wait a
    second for the SYN to be sent again, and that is the server's, not the client's. `windows`
    (rules version 11 on: the kept repetitions' measurement windows): only the client samples of
    those windows, where the measured requests were sent and read; a warm-up's burst of
    connections is not the window's (a closed loop of 4,000 users connecting at once held a core
    for the first second, and failed a run whose window came after it). Every sample where none
    falls inside a window. With `windows` the CPU share is also read at its tail quantile, as the
    lags are: a tenth of a second at a full core (1,000 users whose answers end together, their
    loop lag 2.5 ms) is not a client that bounds the run, and five such samples or more are."""
    lag_ms = send_lag_ns(requests) / 1e6
    if less_connect and "connect_ns" in requests.column_names:
        lag_ms = lag_ms - np.nan_to_num(numeric_column(requests, "connect_ns"), nan=0.0) / 1e6
    dispatch = _tail(lag_ms[measured_rows(requests, discarded)])
    if telemetry is None or not telemetry.num_rows:
        return LagFacts(dispatch, None, None, None, less_connect=less_connect)
    client = object_column(telemetry, "source") == "client"
    name, value = object_column(telemetry, "name")[client], numeric_column(telemetry, "value")[client]
    t_ns = numeric_column(telemetry, "t_ns")[client]
    worker = numeric_column(telemetry, "worker")[client] if "worker" in telemetry.column_names \
        else np.zeros(len(name))
    worker = np.where(np.isfinite(worker), worker, -1.0)
    if windows is not None:
        inside = _in_windows(t_ns, worker, windows)
        if inside.any():
            name, value, t_ns, worker = name[inside], value[inside], t_ns[inside], worker[inside]
    loop = _tail(value[name == "loop_lag_ms"])
    shares, waits = value[name == "cpu_share"], value[name == "run_wait_share"]
    explains = None if loop is None else _wait_explains(t_ns, worker, name, value, loop.ms)
    windowed = windows is not None and len(shares) > 0
    return LagFacts(dispatch, loop, float(shares.mean()) if len(shares) else None,
                    float(waits.mean()) if len(waits) else None, explains, less_connect,
                    _tail(shares) if windowed else None, float(shares.max()) if windowed else None)


def _p50_ms(results: ResultsFigures, metric: str) -> float | None:
    stat = results["metrics"].get(metric)
    value = None if stat is None else stat.get("p50")
    return None if value is None else float(value) * 1000.0


def _bound_ms(scale_ms: float | None, share: float, lim: ValidityLimits) -> float:
    """share x scale, clamped to the floor and ceiling (the ceiling alone without a scale); the
    limits are the spec's, present in every effective spec of rules version 3."""
    if scale_ms is None:
        return lim["lag_ceiling_ms"]
    return min(lim["lag_ceiling_ms"], max(lim["lag_floor_ms"], share * scale_ms))


def _status(lag_ms: float, fail_ms: float, warn_ms: float) -> RuleStatus:
    return "FAIL" if lag_ms > fail_ms else ("WARN" if lag_ms > warn_ms else "PASS")


def _cause(facts: LagFacts) -> tuple[str, bool]:
    """(what the samples say made the client late, whether it was this process)."""
    cpu, wait, explains = facts.cpu_share_mean, facts.run_wait_share, facts.wait_explains
    used = f"{0.0 if cpu is None else cpu:.0%} of a core"
    if cpu is not None and cpu >= _BUSY:
        return f"this process: it used {used} on average", True
    if wait is None:
        return f"not measured (no run-queue samples); the harness used {used}", False
    if (explains is not None and explains >= 0.5) or wait >= _CONTENDED:
        detail = f"{explains:.0%} of the worst loop lags" if explains is not None else f"{wait:.0%} of the time"
        return (f"other processes on this machine: the harness's event loop was waiting for a CPU for {detail} "
                f"(it used {used})"), False
    return (f"not a wait for a CPU ({0.0 if explains is None else explains:.0%} of the worst loop lags) nor this "
            f"process's CPU use ({used}): a callback held the loop (garbage collection, a slow write)"), False


def _remedy(open_loop: bool, own: bool) -> str:
    if own:
        return ("this process was the bottleneck: spread the load over processes (load.workers: auto)"
                + (" or lower load.rate_per_s" if open_loop else " or lower load.concurrency"))
    return ("give the harness CPUs of its own: run it on another machine than the engine, or pin the engine away "
            "from it (taskset -c / cgroups), and stop other busy work on the machine")


def dispatch_lag_rule(results: ResultsFigures, facts: LagFacts, open_loop: bool, offered_rate_per_s: float | None,
                      lim: ValidityLimits, cap_note: str, cap_remedy: str | None) -> RuleFigures:
    """Sends behind the schedule, judged by what they distort (see the module docstring).
    `cap_note`/`cap_remedy`: what an open loop's in-flight cap adds (`_validity._cap_words`)."""
    lag = facts.dispatch
    assert lag is not None
    share = lim["max_lag_share"]
    if open_loop:
        gap_ms = 1000.0 / offered_rate_per_s if offered_rate_per_s else None
        ttft_ms = _p50_ms(results, "ttft.any")
        candidates = [(v, w) for v, w in ((gap_ms, "the schedule's mean gap"), (ttft_ms, "TTFT p50")) if v]
        scale_ms, against = min(candidates) if candidates else (None, "")
        effect = "arrivals moved by"
    else:
        scale_ms, against = _p50_ms(results, "e2e"), "E2E p50"
        effect = "each user idle that long per request,"
    fail_ms = _bound_ms(scale_ms, share, lim)
    warn_ms = min(lim["max_dispatch_lag_p99_ms"], _bound_ms(scale_ms, share / 5, lim), fail_ms)
    status = _status(lag.ms, fail_ms, warn_ms)
    relative = f": {effect} {lag.ms / scale_ms:.1%} of {against} {scale_ms:.2f} ms" if scale_ms else ""
    setup = " (less a new connection's setup, the server's accept)" if facts.less_connect else ""
    message = (f"send lag behind the intended time{setup} {lag.label}{relative}; fails above {fail_ms:.2f} ms, "
               f"warns above {warn_ms:.2f} ms" + cap_note)
    cause, own = _cause(facts)
    if status != "PASS":
        message += f"; cause: {cause}"
    remedy = cap_remedy or _remedy(open_loop, own)
    return {"name": "dispatch_lag", "status": status, "measured": round(lag.ms, 3), "threshold": round(fail_ms, 3),
            "message": message, "recommendation": None if status == "PASS" else remedy}


def client_rule(results: ResultsFigures, facts: LagFacts, open_loop: bool, lim: ValidityLimits,
                workers_note: str) -> RuleFigures:
    """The client's own CPU share and loop lag (see the module docstring)."""
    cpu_max = results["client"]["cpu_share_max"]
    lag = facts.loop
    assert lag is not None and cpu_max is not None
    judged = cpu_max if facts.cpu_share is None else facts.cpu_share.ms
    share = lim["max_lag_share"]
    ttft_ms, itl_ms = _p50_ms(results, "ttft.any"), _p50_ms(results, "itl.chunk")
    fail_ms = _bound_ms(ttft_ms, share, lim)
    warn_ms = min(lim["max_loop_lag_p99_ms"], _bound_ms(itl_ms, share, lim) if itl_ms else fail_ms, fail_ms)
    status = _status(lag.ms, fail_ms, warn_ms)
    saturated = judged > lim["max_client_cpu_share"]
    if saturated:
        status = "FAIL"
    parts = [f"loop lag {lag.label}"]
    if ttft_ms:
        parts.append(f"{lag.ms / ttft_ms:.1%} of TTFT p50 {ttft_ms:.2f} ms")
    if itl_ms:
        parts.append(f"{lag.ms / itl_ms:.1%} of ITL p50 {itl_ms:.2f} ms")
    if facts.cpu_share is None:
        cpu_words = f"CPU share max {cpu_max:.2f} of a core"
    else:
        tail = facts.cpu_share
        cpu_words = (f"CPU share p{tail.q * 100:.3g} {tail.ms:.2f} of a core (n={tail.n}) in the measurement window, "
                     f"max {facts.cpu_share_max:.2f}")
    message = ", ".join(parts) + f"; {cpu_words} (fails above {lim['max_client_cpu_share']})"
    message += f"; loop lag fails above {fail_ms:.2f} ms, warns above {warn_ms:.2f} ms" + workers_note
    cause, own = _cause(facts)
    if status == "WARN" and itl_ms and lag.ms > warn_ms:
        message += f"; the ITL percentiles carry up to {lag.ms:.2f} ms of it, TPOT and E2E hardly any"
    if status != "PASS":
        message += f"; cause: {'this process at its CPU limit' if saturated else cause}"
    return {"name": "client_not_bound", "status": status, "measured": round(lag.ms, 3),
            "threshold": round(fail_ms, 3), "message": message,
            "recommendation": None if status == "PASS" else _remedy(open_loop, own or saturated)}
