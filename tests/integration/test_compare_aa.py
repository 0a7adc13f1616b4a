"""A/A: runs of one simulator spec, compared pairwise, must not be told apart (issue 12). The
twenty pairs come from seven runs; at least 19 must show no significant difference on every
statistic (benchmarks/compare_aa.py runs twenty independent pairs of larger runs)."""

from __future__ import annotations

import itertools
from pathlib import Path

from passport.judge import compare_runs
from passport.model import parse_spec
from passport.run import execute
from tests.conftest import LENIENT_CLIENT, SimFactory

CALLED = ("faster", "slower", "higher", "lower")


def test_twenty_a_a_comparisons_find_nothing_in_at_least_nineteen(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "30", "--ttft-jitter-ms", "5", "--itl-ms", "3", "--seed", "11")
    raw = {"name": "aa", "endpoint": {"base_url": url}, "canaries": "none", "validity": LENIENT_CLIENT,
           "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
                        "output_tokens": {"dist": "fixed", "value": 8}},
           "load": {"pattern": "closed", "concurrency": 4, "measure": {"requests": 100}}}
    runs = [execute(parse_spec(raw), raw, [], tmp_path).folder for _ in range(7)]
    pairs = list(itertools.combinations(runs, 2))[:20]
    called = []
    for a, b in pairs:
        rows = compare_runs([a, b]).metrics[0]
        called.append([f"{m.metric}.{m.stat}: {m.verdict}" for m in rows if m.verdict in CALLED])
    assert sum(not c for c in called) >= 19, called
