"""The report plots draw what they are given and say what they lack."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from harness import TELEMETRY_SCHEMA
from passport.report import latency_cdfs, timeline
from tests.unit.passport.test_metrics import _chunks, _requests

PNG = b"\x89PNG\r\n\x1a\n"


def test_timeline_plots_kv_cache_usage_when_sampled_and_says_so_when_not() -> None:
    png, notes = timeline(_requests(), _chunks(), None, [(0.1, 0.3)])
    assert png.startswith(PNG) and notes == ["the engine's KV-cache usage was not sampled in this run, so it is not "
                                            "plotted"]
    telemetry = pa.table({"t_ns": [0, 100_000_000, 200_000_000], "source": ["engine"] * 3,
                          "name": ["kv_cache_usage"] * 3, "value": [0.1, 0.5, 0.2], "worker": [None] * 3},
                         schema=TELEMETRY_SCHEMA)
    with_kv, notes = timeline(_requests(), _chunks(), telemetry, [(0.1, 0.3)])
    assert notes == [] and with_kv.startswith(PNG) and len(with_kv) != len(png)


def test_cdf_panels_accept_runs_without_samples() -> None:
    png = latency_cdfs({"a": {"ttft.any": np.array([0.01, 0.02]), "itl.chunk": np.zeros(0), "e2e": np.array([0.1])}})
    assert png.startswith(PNG)


def test_the_ecdf_is_a_step_per_sample_and_quantiles_beyond_the_exact_limit() -> None:
    from passport.report._plots import _ecdf

    x, y = _ecdf(np.array([3.0, 1.0, 2.0]))
    # starts at 0 on the smallest value, then jumps by 1/n at each sample: no interpolated slope
    assert x.tolist() == [1.0, 1.0, 2.0, 3.0] and np.allclose(y, [0, 1 / 3, 2 / 3, 1])
    many = np.arange(10_000, dtype=float)
    x, y = _ecdf(many)
    assert len(x) == 2001 and x[-1] == 9999.0 and set(x.tolist()) <= set(many.tolist())  # only real samples


def test_tokens_per_s_per_user_is_completion_tokens_over_the_decode_time() -> None:
    from passport.audit import tokens_per_s_per_user

    requests = pa.table({
        "outcome": ["ok", "ok", "truncated", "http_error", "ok"],
        "phase": ["measure", "measure", "measure", "measure", "warmup"],
        "completion_tokens": [11, 1, 5, None, 9],
        "first_token_ns": [0, 0, 1_000_000_000, None, 0],
        "end_ns": [500_000_000, 10, 2_000_000_000, 5, 100],
    })
    # 11 tokens over 0.5 s; 5 over 1 s; a one-token answer, a failure and a warm-up request do not count
    assert tokens_per_s_per_user(requests).tolist() == [22.0, 5.0]


def test_per_request_and_sweep_plots_draw_with_and_without_data() -> None:
    from passport.report import SweepPoint, sweep_curve
    from passport.report._plots import per_request

    assert per_request(_requests()).startswith(PNG)
    points = [SweepPoint(1, 2.0, 0.01, 0.02, 0.005, True, 100.0), SweepPoint(2, 2.1, 0.02, 0.05, 0.006, False, 60.0)]
    # knee and saturation on the same level still make two marks
    same = sweep_curve(points, "concurrency", knee=1, saturation=1)
    apart = sweep_curve(points, "concurrency", knee=1, saturation=2)
    assert same.startswith(PNG) and apart.startswith(PNG) and same != apart
    assert sweep_curve([SweepPoint(1, 2.0, 0.01, 0.02, 0.005, None)], "rate", None, None).startswith(PNG)
