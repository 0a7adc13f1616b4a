"""compute_results against hand-computed values on a tiny hand-written run folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import CHUNKS_SCHEMA, REQUESTS_SCHEMA, TELEMETRY_SCHEMA
from passport.audit import (
    COUNT_NAMES,
    NO_CANARIES,
    ResultsFigures,
    RunFacts,
    ValidityLimits,
    compute_results,
    evaluate,
    found_cap_full,
    stat,
)
from passport.audit._metrics import _binomial_ci
from passport.model import ValiditySpec

MS = 1_000_000


def _requests() -> pa.Table:
    # id, phase, outcome, intended, sent, first_token, first_content, last_token, end, completion, prompt
    rows = [
        (0, "warmup", "ok", 0, 0, 50, 50, 90, 100, 5, 10),
        (1, "measure", "ok", 100, 100, 120, 130, 160, 200, 5, 10),
        (2, "measure", "ok", 150, 160, 200, 200, 260, 300, 4, 20),
        (3, "measure", "stream_error", 200, 200, None, None, None, 250, None, None),
    ]
    cols: dict[str, list[object]] = {f.name: [] for f in REQUESTS_SCHEMA}
    for rid, phase, outcome, intended, sent, ft, fc, lt, end, comp, prompt in rows:
        row = {"request_id": rid, "repetition": 0, "seq": rid, "phase": phase, "request_index": rid,
               "intended_ns": intended * MS, "sent_ns": sent * MS, "first_token_ns": None if ft is None else ft * MS,
               "first_content_ns": None if fc is None else fc * MS, "last_token_ns": None if lt is None else lt * MS,
               "end_ns": end * MS, "outcome": outcome, "completion_tokens": comp, "prompt_tokens": prompt,
               "max_tokens": 5, "max_tokens_is_target": True,
               "connect_ns": 4 * MS if rid == 2 else None}
        for key in cols:
            cols[key].append(row.get(key))
    return pa.table(cols, schema=REQUESTS_SCHEMA)


def _chunks() -> pa.Table:
    # request 1: token chunks at 120, 140, 160 (+ a non-token chunk at 125); request 2: 200, 230, 260
    rows = [(1, 0, 120, True), (1, 1, 125, False), (1, 2, 140, True), (1, 3, 160, True),
            (2, 0, 200, True), (2, 1, 230, True), (2, 2, 260, True), (0, 0, 50, True), (0, 1, 90, True)]
    return pa.table({
        "request_id": pa.array([r[0] for r in rows], pa.int64()),
        "seq": pa.array([r[1] for r in rows], pa.int32()),
        "recv_ns": pa.array([r[2] * MS for r in rows], pa.int64()),
        "kind": pa.DictionaryArray.from_arrays(pa.array([1 if r[3] else 0 for r in rows], pa.int8()),
                                               pa.array(["empty", "content"])),
        "token_bearing": pa.array([r[3] for r in rows]),
        "n_chars": pa.array([1] * len(rows), pa.int32()),
        "event": pa.nulls(len(rows), pa.string()),
        "data": pa.nulls(len(rows), pa.binary()),
    }, schema=CHUNKS_SCHEMA)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    pq.write_table(_requests(), tmp_path / "requests.parquet")
    pq.write_table(_chunks(), tmp_path / "chunks.parquet")
    pq.write_table(pa.table({"t_ns": [1, 2], "source": ["client", "engine"], "name": ["cpu_share", "rss_bytes"],
                             "value": [0.25, 1e9], "worker": [None, None]}, schema=TELEMETRY_SCHEMA),
                   tmp_path / "telemetry.parquet")
    return tmp_path


def test_latencies_use_measured_successes_only(run_dir: Path) -> None:
    m = compute_results(run_dir)["metrics"]
    assert m["ttft.any"]["n"] == 2 and m["ttft.any"]["mean"] == pytest.approx(0.030)  # 20 ms and 40 ms
    assert m["ttft.content"]["min"] == pytest.approx(0.030) and m["ttft.content"]["max"] == pytest.approx(0.040)
    assert m["ttft.any.sched"]["max"] == pytest.approx(0.050)  # request 2 was intended at 150
    assert m["e2e"]["p50"] == pytest.approx(0.120)  # 100 and 140 ms


def test_dispatch_lag_excludes_connection_setup_which_sched_metrics_keep(run_dir: Path) -> None:
    m = compute_results(run_dir)["metrics"]
    # request 2: intended 150, sent 160 after a 4 ms connect -> 6 ms of harness lateness;
    # every measured request counts (3 of them, the failed one too)
    assert m["dispatch_lag"]["n"] == 3 and m["dispatch_lag"]["max"] == pytest.approx(0.006)
    assert m["e2e.sched"]["max"] == pytest.approx(0.150)  # 300 - 150: the connect stays in *.sched


def test_itl_pools_gaps_between_token_chunks_within_each_request(run_dir: Path) -> None:
    itl = compute_results(run_dir)["metrics"]["itl.chunk"]
    assert itl["n"] == 4  # 20, 20 (the non-token chunk skipped) and 30, 30; warm-up excluded
    assert itl["mean"] == pytest.approx(0.025) and itl["min"] == pytest.approx(0.020)


def test_tpot_is_decode_time_over_tokens_after_the_first(run_dir: Path) -> None:
    tpot = compute_results(run_dir)["metrics"]["tpot"]
    assert sorted([tpot["min"], tpot["max"]]) == pytest.approx([0.010, 0.020])  # 40/4 and 60/3 ms


def test_throughput_and_concurrency_over_the_window(run_dir: Path) -> None:
    r = compute_results(run_dir)
    w = r["windows"][0]
    assert (w["start_ns"], w["end_ns"], w["measured_requests"]) == (100 * MS, 300 * MS, 3)
    m = r["metrics"]
    assert m["throughput.output_tokens_per_s"]["mean"] == pytest.approx(9 / 0.2)
    assert m["throughput.total_tokens_per_s"]["mean"] == pytest.approx(39 / 0.2)
    assert m["throughput.requests_per_s"]["mean"] == pytest.approx(2 / 0.2)
    # in flight over [100, 300]: r1 100-200, r2 160-300, r3 200-250 -> area 100+140+50 = 290 ms
    assert m["concurrency"]["mean"] == pytest.approx(290 / 200) and m["concurrency"]["max"] == 2


def test_failure_inclusive_counts_failures_as_infinite(run_dir: Path) -> None:
    fi = compute_results(run_dir)["metrics_failure_inclusive"]["ttft.any"]
    assert fi["n"] == 3 and fi["n_failed"] == 1 and fi["mean"] is None
    assert fi["p50"] == pytest.approx(0.040) and fi["p99"] is None


def test_outcomes_peak_memory_and_client(run_dir: Path) -> None:
    r = compute_results(run_dir)
    assert r["outcomes"] == {"ok": 2, "stream_error": 1}
    assert r["peak_memory"]["value_bytes"] == 1_000_000_000
    assert r["client"]["cpu_share_max"] == 0.25


def test_stat_percentiles_and_binomial_interval_match_hand_values() -> None:
    s = stat(np.arange(1, 101, dtype=float))
    assert (s["p50"], s["p90"], s["min"], s["max"]) == (50.5, pytest.approx(90.1), 1.0, 100.0)
    assert s["ci95"]["p50"] == [40.0, 61.0]  # ranks 40 and 61 of 100 (exact binomial)
    assert s["ci95"]["p99"] is None  # too few samples for a 95 % interval of p99


def _ranks_over_every_term(n: int, q: float) -> tuple[int, int] | None:
    """The 95 % order-statistic ranks of quantile q from the Binomial(n, q) mass summed over all
    n + 1 terms, as the definition states it (scipy-free; math.lgamma for the coefficients)."""
    k = np.arange(n + 1)
    log_factorial = np.array([math.lgamma(i + 1) for i in range(n + 1)])
    cdf = np.cumsum(np.exp(log_factorial[n] - log_factorial - log_factorial[::-1] + k * math.log(q)
                           + (n - k) * math.log1p(-q)))
    lo, hi = int(np.searchsorted(cdf, 0.025)), int(np.searchsorted(cdf, 0.975)) + 1
    return None if lo < 1 or hi > n else (lo - 1, hi - 1)


@pytest.mark.parametrize("q", [0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999])
def test_the_binomial_ranks_summed_near_the_quantile_are_those_of_the_whole_sum(q: float) -> None:
    """The interval sums the mass over a window only (every term outside it underflows to 0.0):
    the same ranks as the sum over every term, at sizes from 2 to 100,000."""
    for n in [*range(2, 260), 997, 4096, 10_007, 100_000]:
        assert _binomial_ci.__wrapped__(n, q) == _ranks_over_every_term(n, q), (n, q)


def test_found_cap_full_counts_requests_due_while_the_cap_was_held() -> None:
    # in flight at each measured request's intended time (sent before it, not yet ended):
    # request 1 at 100 ms: request 0 ended at 100 -> 0; request 2 at 150: request 1 -> 1;
    # request 3 at 200: request 1 ended at 200, request 2 (sent 160) -> 1
    assert found_cap_full(_requests(), 1) == (2, 3)
    assert found_cap_full(_requests(), 2) == (0, 3)


def _facts(found: tuple[int, int] | None) -> RunFacts:
    return RunFacts(complete=True, incomplete_reason=None, open_loop=True, launched_engine=False, git_dirty=False,
                    exact_lengths=False, canaries=NO_CANARIES, forced=False,
                    in_flight_cap=None if found is None else 3, found_cap_full=found)


def _dispatch_rule(found: tuple[int, int] | None, lag_ms: float) -> dict[str, object]:
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": lag_ms, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None}})
    limits = cast(ValidityLimits, ValiditySpec(max_dispatch_lag_p99_ms=10.0).model_dump())
    counts: dict[str, int | None] = {name: 0 for name in COUNT_NAMES}
    rule = next(r for r in evaluate(results, counts, _facts(found), limits) if r["name"] == "dispatch_lag")
    return dict(rule)


def test_dispatch_lag_advice_blames_the_cap_when_requests_found_it_full() -> None:
    capped = _dispatch_rule((40, 100), 250.0)
    assert capped["status"] == "FAIL"
    assert "40 of 100 measured requests found the in-flight cap (load.concurrency 3) full" in str(capped["message"])
    assert "the cap, not the harness" in str(capped["recommendation"])
    # nobody waited for a slot: the lag is the harness's own
    free = _dispatch_rule((0, 100), 250.0)
    assert "0 of 100" in str(free["message"]) and "harness fell behind" in str(free["recommendation"])
    # rules version 1 (no cap figures): the message as those passports wrote it
    old = _dispatch_rule(None, 250.0)
    assert old["message"] == "p99 send lag behind the intended time 250.000 ms"
    assert _dispatch_rule((40, 100), 1.0)["recommendation"] is None


def test_clock_offsets_warn_when_a_hosts_offset_cannot_be_bounded() -> None:
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": 1.0, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None}})
    limits = cast(ValidityLimits, ValiditySpec().model_dump())
    counts: dict[str, int | None] = {name: 0 for name in COUNT_NAMES}
    bounded = {"worker": 0, "uncertainty_ns": 300_000, "uncertainty_after_ns": 250_000, "bounded": True}
    loose = {"worker": 1, "uncertainty_ns": 4_000_000, "uncertainty_after_ns": 3_000_000, "bounded": False}

    def rule(clocks: list[dict[str, object]] | None) -> list[dict[str, object]]:
        facts = RunFacts(complete=True, incomplete_reason=None, open_loop=True, launched_engine=False,
                         git_dirty=False, exact_lengths=False, canaries=NO_CANARIES, forced=False, clocks=clocks)
        return [dict(r) for r in evaluate(results, counts, facts, limits) if r["name"] == "clock_offsets"]

    assert rule(None) == []  # one host: no such rule
    (ok,) = rule([bounded])
    assert ok["status"] == "PASS" and "bounded within 0.300 ms" in str(ok["message"])
    (warn,) = rule([bounded, loose])
    assert warn["status"] == "WARN" and "worker(s) 1 could not be bounded" in str(warn["message"])


def test_achieved_rate_names_each_rate_and_labels_the_ratio() -> None:
    # a Poisson run showed 0.563 and 0.599 req/s and a bare 0.94 beside the declared rate
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": None, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None}})
    limits = cast(ValidityLimits, ValiditySpec().model_dump())
    counts: dict[str, int | None] = {name: 0 for name in COUNT_NAMES}
    facts = RunFacts(complete=True, incomplete_reason=None, open_loop=True, launched_engine=False, git_dirty=False,
                     exact_lengths=True, canaries=NO_CANARIES, forced=False, offered_rate_per_s=0.599,
                     achieved_rate_per_s=0.563, declared_rate_per_s=0.6)
    rule = next(r for r in evaluate(results, counts, facts, limits) if r["name"] == "achieved_rate")
    assert rule["status"] == "PASS" and rule["measured"] == 0.9399
    assert rule["message"].startswith("achieved / offered = 0.940: completions came at 0.563 req/s (first to last "
                                      "completion) while the schedule offered 0.599 req/s (first to last scheduled "
                                      "arrival; the declared 0.6/s is the mean")


def test_impossible_server_accounting_is_counted_and_fails_the_run() -> None:
    import pyarrow as pa

    from passport.audit import count_outcomes

    table = pa.table({"phase": ["measure"] * 3, "repetition": [0] * 3,
                      "outcome": ["ok", "stream_error", "stream_error"],
                      "error": [None, "server accounting: usage completion_tokens is -1000000, not a token count",
                                "stream ended without a finish_reason or [DONE]"],
                      "timeout_kind": [None] * 3, "max_tokens_is_target": [True] * 3,
                      "completion_tokens": [8.0, None, None], "max_tokens": [8] * 3})
    counts = count_outcomes(table, accounting=True)
    assert counts["accounting_errors"] == 1 and counts["stream_errors"] == 2
    assert "accounting_errors" not in count_outcomes(table)  # rules versions 1-2 never counted them
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": None, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None}})
    facts = RunFacts(complete=True, incomplete_reason=None, open_loop=False, launched_engine=False, git_dirty=False,
                     exact_lengths=True, canaries=NO_CANARIES, forced=False)
    rules = {r["name"]: r for r in evaluate(results, counts, facts, cast(ValidityLimits, ValiditySpec().model_dump()))}
    assert rules["server_accounting"]["status"] == "FAIL" and rules["server_accounting"]["measured"] == 1
    assert "server_accounting" not in {r["name"] for r in evaluate(results, count_outcomes(table), facts,
                                                                    cast(ValidityLimits, ValiditySpec().model_dump()))}
