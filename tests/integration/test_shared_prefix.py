"""Shared prefixes against the simulated engine: group structure on the wire, a per-run salt
outside the workload hash, and runs that stay comparable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import SimFactory, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
WORKLOAD = {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": 8},
            "output_tokens": {"dist": "fixed", "value": 4}, "shared_prefix": {"groups": 2, "prefix_tokens": 30}}


def test_salted_prefixes_are_sent_per_group_and_runs_stay_comparable(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(_spec(url, {"pattern": "closed", "concurrency": 2, "measure": {"requests": 16}},
                            workload=WORKLOAD))
    runs, salts, hashes = [], [], []
    for out in ("a", "b"):
        assert run_cli("run", str(spec), "--out", str(tmp_path / out), "--quiet").returncode == 0
        (run,) = list((tmp_path / out).iterdir())
        passport = json.loads((run / "passport.json").read_text())
        salt = passport["protocol"]["workload"]["salt"]
        assert salt == f"[run {passport['run_id']}]"
        requests = pq.read_table(run / "requests.parquet").to_pandas()
        assert requests.prompt.str.startswith(salt + " ").all()
        prefixes = {p.removeprefix(salt + " ").split("\n\n")[0] for p in requests.prompt}
        assert len(prefixes) == 2  # two groups on the wire
        schedule = pq.read_table(run / "schedule.parquet").to_pandas()
        assert not schedule.prompt.str.contains(salt, regex=False).any()  # the salt is outside the workload
        runs.append(run)
        salts.append(salt)
        hashes.append(passport["protocol"]["workload"]["sha256"])
    assert salts[0] != salts[1] and hashes[0] == hashes[1]
    compare = run_cli("compare", str(runs[0]), str(runs[1]))
    assert compare.returncode == 0 and "same     workload" in compare.stdout
