"""`passport workload` shows what a run will offer, and a run offers exactly that, byte for byte."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimFactory, run_cli
from tests.integration.test_faults import _spec

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

WriteSpec = Callable[..., Path]
WORKLOAD = {"tokenizer": "none", "input_tokens": {"dist": "uniform", "low": 8, "high": 40},
            "output_tokens": {"dist": "fixed", "value": 4}}
LOAD = {"pattern": "poisson", "rate_per_s": 50, "warmup": {"requests": 2}, "measure": {"requests": 30}, "seed": 3}


def test_the_summary_names_the_hashes_the_run_then_carries_and_schedules_are_byte_identical(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    # the subject is hashes and schedules: a busy machine's late completions (the achieved-rate
    # rule: 0.78 of 30 requests' offered rate once in CI beside a campaign test) are not
    spec = write_spec(_spec(url, LOAD, workload=WORKLOAD, validity={"min_achieved_rate_fraction": 0.1}))
    summary = run_cli("workload", str(spec))
    assert summary.returncode == 0, summary.stderr
    lines = summary.stdout.splitlines()
    assert lines[0].startswith("workload: 32 distinct requests, sha256 ")
    assert "input tokens, target: n=32" in summary.stdout and "inter-arrival gaps (ms): n=31" in summary.stdout
    shared = run_cli("workload", str(write_spec(_spec(url, LOAD, workload={**WORKLOAD, "shared_prefix": {
        "groups": 2, "prefix_tokens": 12}}), name="shared.yaml")))
    assert "shared prefixes: 2 groups of 12 tokens, salt per_run" in shared.stdout
    workload_sha = lines[0].rsplit(" ", 1)[1]
    schedule_sha = lines[2].rsplit(" ", 1)[1]
    digests = []
    for out in ("a", "b"):
        assert run_cli("run", str(spec), "--out", str(tmp_path / out), "--quiet").returncode == 0
        (run,) = list((tmp_path / out).iterdir())
        passport = json.loads((run / "passport.json").read_text())
        assert passport["protocol"]["workload"]["sha256"] == workload_sha
        assert passport["protocol"]["schedule"]["sha256"] == schedule_sha
        digests.append(hashlib.sha256((run / "schedule.parquet").read_bytes()).hexdigest())
    assert digests[0] == digests[1]  # same spec, seed and tokenizer: the same bytes


def test_the_summary_shows_the_shares_of_each_shape_and_the_presets_are_listed(write_spec: WriteSpec) -> None:
    mix = {"tokenizer": "none", "mix": [
        {"name": "chat", "weight": 2, "workload": {"input_tokens": {"dist": "fixed", "value": 8}}},
        {"name": "conv", "weight": 1, "workload": {"sessions": {"turns": 3, "think_time_s": 0.5}}},
        {"name": "json", "weight": 1, "workload": {"structured_output": {}}},
        {"name": "agent", "weight": 1, "workload": {"tools": {"tool_choice": "auto"}}},
        {"name": "vision", "weight": 1, "workload": {"images": {"sizes": ["64x32"], "count": 2}}}]}
    spec = write_spec(_spec("http://127.0.0.1:9/v1", {**LOAD, "measure": {"requests": 60}, "warmup": {"requests": 0}},
                            workload=mix))
    summary = run_cli("workload", str(spec))
    assert summary.returncode == 0, summary.stderr
    out = summary.stdout
    shapes = next(line for line in out.splitlines() if line.startswith("shapes, as drawn: "))
    counts = {part.split()[0]: int(part.split()[1]) for part in shapes.removeprefix("shapes, as drawn: ").split(", ")}
    entries = 60
    sessions = counts["conv"] // 3
    assert sum(counts.values()) - counts["conv"] + sessions == entries  # a session is one entry of three turns
    assert f"entries: {entries} (a session counts once), requests: {sum(counts.values())}" in out
    assert f"turns per session ({sessions} sessions): all {sessions} = 3" in out
    assert f"structured output: {counts['json']} requests" in out
    assert f"tools: {counts['agent']} requests" in out and "tool_choice {'auto'" in out
    assert f"images: {counts['vision']} requests" in out and f"64x32 x{2 * counts['vision']}" in out
    assert "mix, as declared: chat weight 2 (33% of entries)" in out
    presets = run_cli("workload", "--presets")
    assert presets.returncode == 0 and presets.stdout.splitlines()[0].startswith("chat ")
    assert "multi-turn" in presets.stdout and "structured-output" in presets.stdout
    assert run_cli("workload").returncode == 2  # neither a spec nor --presets


def test_every_shape_in_one_mix_gives_the_summarized_hashes_and_byte_identical_schedules(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    mix = {"tokenizer": "none", "mix": [
        {"name": n, "weight": 1, "workload": {"preset": n, "output_tokens": {"dist": "fixed", "value": 4}}}
        for n in ("chat", "multi-turn", "structured-output", "tool-calls", "images", "own-traffic")]}
    mix["mix"][1]["workload"]["sessions"] = {"turns": 2, "think_time_s": 0.01}
    spec = write_spec(_spec(url, {**LOAD, "measure": {"requests": 24}}, workload=mix))
    lines = run_cli("workload", str(spec)).stdout.splitlines()
    digests = []
    for out in ("a", "b"):
        assert run_cli("run", str(spec), "--out", str(tmp_path / out), "--quiet").returncode == 0
        (run,) = list((tmp_path / out).iterdir())
        passport = json.loads((run / "passport.json").read_text())
        assert passport["protocol"]["workload"]["sha256"] == lines[0].rsplit(" ", 1)[1]
        assert passport["protocol"]["schedule"]["sha256"] == lines[2].rsplit(" ", 1)[1]
        digests.append(hashlib.sha256((run / "schedule.parquet").read_bytes()).hexdigest())
    assert digests[0] == digests[1]
