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
                          "name": ["kv_cache_usage"] * 3, "value": [0.1, 0.5, 0.2]},
                         schema=TELEMETRY_SCHEMA)
    with_kv, notes = timeline(_requests(), _chunks(), telemetry, [(0.1, 0.3)])
    assert notes == [] and with_kv.startswith(PNG) and len(with_kv) != len(png)


def test_cdf_panels_accept_runs_without_samples() -> None:
    png = latency_cdfs({"a": {"ttft.any": np.array([0.01, 0.02]), "itl.chunk": np.zeros(0), "e2e": np.array([0.1])}})
    assert png.startswith(PNG)
