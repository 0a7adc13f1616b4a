"""load.backend: ray on a local multi-node Ray cluster (ray.cluster_utils.Cluster: a head and a
second node, each its own raylet, on this machine): workers as actors on both nodes, clocks
estimated and bounded, one merged passport matching a single-process run of the same schedule;
an address that does not answer; an actor that dies."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_CLIENT, REPO, SimFactory, closed_port, only_run_dir, run_cli
from tests.faults import fault
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.ray

WriteSpec = Callable[..., Path]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    yield str(cluster.address)
    cluster.shutdown()


def _ray_load(address: str, **extra: Any) -> dict[str, Any]:
    return {"pattern": "poisson", "rate_per_s": 50, "measure": {"requests": 100}, "workers": 2, "backend": "ray",
            "ray_address": address, **extra}


def test_ray_workers_on_two_nodes_give_one_passport_matching_a_single_process(
    ray_cluster: str, simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "10", "--itl-ms", "3")
    single = _spec(url, {"pattern": "poisson", "rate_per_s": 50, "measure": {"requests": 100}})
    assert run_cli("run", str(write_spec(single, name="one.yaml")), "--out", str(tmp_path / "one")).returncode == 0
    spread = _spec(url, _ray_load(ray_cluster), validity=LENIENT_CLIENT)
    result = run_cli("run", str(write_spec(spread, name="ray.yaml")), "--out", str(tmp_path / "ray"), timeout_s=300)
    assert result.returncode == 0, result.stdout + result.stderr
    one = json.loads((only_run_dir(tmp_path / "one") / "passport.json").read_text())
    run = only_run_dir(tmp_path / "ray")
    two = json.loads((run / "passport.json").read_text())
    workers = two["protocol"]["workers"]
    assert workers["backend"] == "ray" and workers["count"] == 2 and workers["nodes"] == 2
    clocks = workers["clocks"]
    assert len({c["node"] for c in clocks}) == 2  # one actor on each node
    for c in clocks:  # one machine, one monotonic clock: the true offset is 0, within what the round trips bound
        assert c["via"] == "socket" and c["bounded"], c
        assert abs(c["offset_ns"]) <= c["uncertainty_ns"] and abs(c["offset_after_ns"]) <= c["uncertainty_after_ns"]
    rule = next(r for r in two["validity"]["rules"] if r["name"] == "clock_offsets")
    assert rule["status"] == "PASS"
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    assert set(requests.worker) == {0, 1} and len(requests) == 100 and requests.request_id.is_unique
    assert two["protocol"]["schedule"]["sha256"] == one["protocol"]["schedule"]["sha256"]
    for metric, scripted_s in (("ttft.any", 0.010), ("e2e", 0.010 + 7 * 0.003)):
        # the same server and schedule: never under the simulator's scripted floor in either (how far over it
        # is the machine's speed: beside a CPU hog the Ray run's extra processes took TTFT p50 to 44 ms)
        for passport in (one, two):
            assert passport["results"]["metrics"][metric]["p50"] >= scripted_s, (metric, passport["results"])
    assert run_cli("verify", str(run)).returncode == 0


def test_a_ray_address_that_does_not_answer_is_refused_before_anything_is_sent(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    spec = write_spec(_spec(url, _ray_load(f"127.0.0.1:{closed_port()}"), canaries="default"))
    started = time.monotonic()
    result = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "cannot reach the Ray cluster at 127.0.0.1:" in result.stderr
    assert time.monotonic() - started < 30
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _flushed(worker: int, since: float) -> bool:
    """Whether Ray worker `worker` of the run started at `since` has flushed requests to disk."""
    rows = 0
    for folder in Path(tempfile.gettempdir()).glob(f"passport-w{worker}-*"):
        if folder.stat().st_mtime >= since:
            for part in (folder / "requests.parts").glob("*.parquet"):
                with contextlib.suppress(Exception):  # a part still being written
                    rows += pq.read_metadata(part).num_rows
    return rows > 0


@fault("a Ray worker (actor) dies mid-run",
       "the run stops INCOMPLETE naming the worker, its node and when; what its host wrote is fetched and kept")
def test_a_ray_worker_that_dies_is_named_and_its_records_kept(
    ray_cluster: str, simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "5", "--itl-ms", "2")
    spec = write_spec(_spec(url, _ray_load(ray_cluster, measure={"duration_s": 60}), validity=LENIENT_CLIENT))
    proc = subprocess.Popen([sys.executable, "-m", "passport.cli", "run", str(spec), "--out", str(tmp_path / "out"),
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    deadline, victim, since = time.monotonic() + 90, None, time.time()
    while time.monotonic() < deadline and victim is None:
        runners = [p for p in psutil.process_iter(["cmdline"]) if "Worker.run" in " ".join(p.info["cmdline"] or [])]
        if len(runners) == 2 and _flushed(0, since) and _flushed(1, since):  # both recorded and flushed a part
            victim = runners[1]
        time.sleep(0.2)
    assert victim is not None, "the Ray workers never started"
    victim.kill()
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 1, stdout + stderr
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    reason = passport["validity"]["incomplete_reason"]
    assert passport["verdict"] == "INCOMPLETE" and " on host " in reason and " died " in reason, reason
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    assert set(requests.worker) == {0, 1}  # the dead worker's flushed rows came back from its host
    assert run_cli("verify", str(run)).returncode == 0
