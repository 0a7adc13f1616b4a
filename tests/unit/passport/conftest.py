from __future__ import annotations

from typing import cast

import pytest

from passport import Passport
from passport.audit import StatFigures, empty_stat
from passport.model import (
    ClockInfo,
    HarnessInfo,
    Protocol,
    ScheduleInfo,
    SourcedValue,
    Validity,
    WorkloadInfo,
)


def stat_of(n: int, **figures: float | int | None) -> StatFigures:
    """A metric summary of `n` samples with the given statistics (the rest null)."""
    return cast(StatFigures, {**empty_stat(n), **figures})


@pytest.fixture
def sample_passport() -> Passport:
    return Passport(
        run_id="abcd1234", name="t", created_utc="2026-11-29T00:00:00Z", verdict="VALID",
        identity={"model.id": SourcedValue(value="m", source="probed", via="/v1/models")},
        protocol=Protocol(
            spec={"load": {"pattern": "closed"}}, effective={"load": {"repetitions": 1}}, overrides=[],
            workload=WorkloadInfo(sha256="a" * 64, n_requests=1, seed=0, tokenizer="none", tokenizer_sha256=None,
                                  exact_lengths=False),
            schedule=ScheduleInfo(sha256="b" * 64, pattern="closed@1", n_scheduled=1, n_warmup=0, window_s=None,
                                  seed=0),
            harness=HarnessInfo(version="0", git_revision=None, git_dirty=None, python="3.11", platform="x",
                                uvloop=True, raw_schema_version=1),
            clock=ClockInfo(clock="c", t0_perf_counter_ns=1, t0_utc="2026-11-29T00:00:00Z"), seeds={"workload": 0},
            request_params={}, max_tokens_is_target=True, prefix_cache={}, metric_definitions={},
            started_utc="s", finished_utc="f"),
        validity=Validity(verdict="VALID", complete=True, canaries={"status": "not_run", "suite": "none"},
                          rules=[{"name": "r", "status": "PASS", "measured": 3, "threshold": 1, "message": "m",
                                  "recommendation": None}],
                          counts={"measured": 1}),
        results={"metrics": {"ttft.any": stat_of(1, p50=0.1)}, "metrics_failure_inclusive": {}, "outcomes": {"ok": 1},
                 "windows": [], "peak_memory": {"value_bytes": None, "source": None}, "engine_restarts": None,
                 "client": {"cpu_share_mean": None, "cpu_share_max": None, "loop_lag_p99_ms": None,
                            "dispatch_lag_p99_ms": None}},
        files={},
    )
