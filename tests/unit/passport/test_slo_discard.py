"""SLO goodput and pre-registered discard rules on hand-written run folders (values by hand)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import REQUESTS_SCHEMA, TELEMETRY_SCHEMA
from passport.audit import compute_results, parse_discard_rule, parse_slo, write_declared
from tests.unit.passport.test_metrics import MS, _chunks, _requests


def _declare(folder: Path, slo: dict[str, str] | None = None, discard: list[str] | None = None,
             capacity: int | None = None) -> None:
    source = "probed (/props)" if capacity else None
    write_declared(folder, {"slo": slo or {}, "discard": discard or []}, capacity, source)


@pytest.fixture
def one_rep(tmp_path: Path) -> Path:
    # measured: #1 ok (ttft 20 ms, gaps 20/20 ms, e2e 100 ms), #2 ok (ttft 40 ms, gaps 30/30 ms), #3 failed;
    # window 100..300 ms = 0.2 s
    pq.write_table(_requests(), tmp_path / "requests.parquet")
    pq.write_table(_chunks(), tmp_path / "chunks.parquet")
    return tmp_path


def test_goodput_counts_requests_meeting_every_target_and_failures_miss(one_rep: Path) -> None:
    _declare(one_rep, slo={"ttft.any.p50": "30ms"})
    r = compute_results(one_rep)
    assert r["slo"]["requests_meeting"] == 1 and r["slo"]["requests_measured"] == 3
    assert r["slo"]["attainment"] == pytest.approx(1 / 3)
    assert r["metrics"]["goodput.requests_per_s"]["mean"] == pytest.approx(1 / 0.2)
    assert r["metrics"]["goodput.output_tokens_per_s"]["mean"] == pytest.approx(5 / 0.2)
    # run level: p50 of [20 ms, 40 ms, +inf] is 40 ms
    (target,) = r["slo"]["targets"]
    assert target["measured_s"] == pytest.approx(0.040) and target["met"] is False and r["slo"]["met"] is False


def test_a_run_meets_its_slo_when_every_percentile_is_within_bounds(one_rep: Path) -> None:
    _declare(one_rep, slo={"ttft.any.p50": "45ms", "e2e.p50": "150ms"})
    slo = compute_results(one_rep)["slo"]
    assert [t["met"] for t in slo["targets"]] == [True, True] and slo["met"] is True
    assert slo["requests_meeting"] == 2  # #1 and #2 meet both; the failure cannot


def test_itl_target_applies_to_each_requests_own_gaps(one_rep: Path) -> None:
    _declare(one_rep, slo={"itl.chunk.max": "25ms"})
    r = compute_results(one_rep)
    assert r["slo"]["requests_meeting"] == 1  # #1's gaps are 20 ms; #2's are 30 ms
    assert r["slo"]["targets"][0]["measured_s"] is None  # the max over a set holding a failure is undefined


def test_without_declarations_there_is_no_slo_and_no_discard(one_rep: Path) -> None:
    r = compute_results(one_rep)
    assert r["slo"] is None and r["discard"] is None and "goodput.requests_per_s" not in r["metrics"]


def _two_reps(folder: Path) -> Path:
    """rep 0: #0, #1 ok; rep 1: #2 ok (e2e 200 ms), #3 failed with an out-of-memory error. Prompt 10 + max_tokens 5."""
    rows = [(0, 0, "ok", 0, 100, None), (1, 0, "ok", 50, 150, None),
            (2, 1, "ok", 1000, 1200, None), (3, 1, "http_error", 1050, 1060, "HTTP 500: CUDA out of memory")]
    cols: dict[str, list[object]] = {f.name: [] for f in REQUESTS_SCHEMA}
    for rid, rep, outcome, sent, end, error in rows:
        ok = outcome == "ok"
        row = {"request_id": rid, "repetition": rep, "seq": rid, "phase": "measure", "request_index": rid,
               "intended_ns": sent * MS, "sent_ns": sent * MS, "first_token_ns": (sent + 10) * MS if ok else None,
               "last_token_ns": (end - 10) * MS if ok else None, "end_ns": end * MS, "outcome": outcome,
               "error": error, "completion_tokens": 5 if ok else None, "prompt_tokens": 10 if ok else None,
               "input_tokens_client": 10, "max_tokens": 5, "max_tokens_is_target": True}
        for key in cols:
            cols[key].append(row.get(key))
    pq.write_table(pa.table(cols, schema=REQUESTS_SCHEMA), folder / "requests.parquet")
    return folder


@pytest.mark.parametrize("rule", ["error_rate > 10%", "out_of_memory", "e2e.p50 > 150ms"])
def test_a_discarded_repetition_leaves_the_results_but_is_listed(tmp_path: Path, rule: str) -> None:
    folder = _two_reps(tmp_path)
    baseline = compute_results(folder)
    assert baseline["metrics"]["e2e"]["n"] == 3
    _declare(folder, discard=[rule])
    r = compute_results(folder)
    (gone,) = r["discard"]["discarded"]
    assert gone["repetition"] == 1 and gone["rule"] == rule
    assert r["metrics"]["e2e"]["n"] == 2 and r["outcomes"] == {"ok": 2}
    assert [w["repetition"] for w in r["windows"]] == [0]
    assert pq.read_table(folder / "requests.parquet").num_rows == 4  # raw logs keep everything


def test_engine_exit_discards_the_repetition_that_was_running(tmp_path: Path) -> None:
    folder = _two_reps(tmp_path)
    pq.write_table(pa.table({"t_ns": [0, 1070 * MS], "source": ["engine", "engine"], "name": ["launched", "exit"],
                             "value": [1.0, 1.0], "worker": [None, None]}, schema=TELEMETRY_SCHEMA),
                   folder / "telemetry.parquet")
    _declare(folder, discard=["engine_exited"])
    assert [d["repetition"] for d in compute_results(folder)["discard"]["discarded"]] == [1]


def test_capacity_rule_needs_the_realized_capacity(tmp_path: Path) -> None:
    folder = _two_reps(tmp_path)
    _declare(folder, discard=["capacity_below_workload"])
    r = compute_results(folder)
    assert r["discard"]["discarded"] == []
    assert r["discard"]["not_evaluable"] == [{"rule": "capacity_below_workload",
                                              "reason": "the engine reported no per-sequence context capacity"}]
    _declare(folder, discard=["capacity_below_workload"], capacity=12)  # each request needs 10 + 5
    assert [d["repetition"] for d in compute_results(folder)["discard"]["discarded"]] == [0, 1]
    _declare(folder, discard=["capacity_below_workload"], capacity=16)
    assert compute_results(folder)["discard"]["discarded"] == []


@pytest.mark.parametrize("text, message", [
    ("errors > 5%", "not understood"),
    ("ttft.any.p42 > 1s", "stat of"),
    ("error_rate > lots", "could not convert"),
])
def test_bad_discard_rules_are_refused_with_the_grammar(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_discard_rule(text)


def test_bad_slo_targets_are_refused() -> None:
    with pytest.raises(ValueError, match="metric id of"):
        parse_slo({"throughput.p99": "1s"})
    with pytest.raises(ValueError, match="must be positive"):
        parse_slo({"ttft.any.p99": "0ms"})
