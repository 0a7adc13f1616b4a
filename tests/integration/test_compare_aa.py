"""A/A: runs of one simulator spec, compared pairwise, must not be told apart (issues 12 and 28),
on a quiet machine and beside a CPU hog (one busy process per core). The twenty pairs come from
seven runs; at least 19 must show no significant difference on every statistic
(benchmarks/compare_aa.py runs twenty independent pairs of larger runs in both cases)."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path

import pytest

from harness.simulator import cpu_hog
from passport.audit import Trust, open_run
from passport.judge import compare_runs
from passport.model import parse_spec
from passport.run import execute
from tests.conftest import LENIENT_CLIENT, SimFactory

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

CALLED = ("faster", "slower", "higher", "lower")


@pytest.mark.parametrize("machine", ["quiet", "busy"])
def test_twenty_a_a_comparisons_find_nothing_in_at_least_nineteen(simulator: SimFactory, tmp_path: Path,
                                                                   machine: str) -> None:
    url = simulator("--ttft-ms", "30", "--ttft-jitter-ms", "5", "--itl-ms", "3", "--seed", "11")
    raw = {"name": "aa", "endpoint": {"base_url": url}, "canaries": "none", "validity": LENIENT_CLIENT,
           "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 8}},
           "load": {"pattern": "closed", "concurrency": 4, "measure": {"requests": 100}}}
    with cpu_hog() if machine == "busy" else contextlib.nullcontext():
        runs = [execute(parse_spec(raw), raw, [], tmp_path).folder for _ in range(7)]
    pairs = list(itertools.combinations(runs, 2))[:20]
    called = []
    for a, b in pairs:
        rows = compare_runs([open_run(a, Trust()), open_run(b, Trust())]).metrics[0]
        assert any(m.p is not None for m in rows)  # statistics were tested, not all skipped
        called.append([f"{m.metric}.{m.stat}: {m.verdict}" for m in rows if m.verdict in CALLED])
    assert sum(not c for c in called) >= 19, called
