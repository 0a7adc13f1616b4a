"""What a performance engineer meets at the command line (issue 14), through the CLI against the
simulator: pipes, recording references, the workload summary's histograms and labels."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import REPO, SimFactory, run_cli

WriteSpec = Callable[..., Path]


def test_a_reader_that_leaves_early_is_no_error(simulator: SimFactory) -> None:
    url = simulator()
    probe = subprocess.Popen([sys.executable, "-m", "passport.cli", "probe", url, "--json"], cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert probe.stdout is not None and probe.stderr is not None
    probe.stdout.close()  # `| head -0`: the pipe is gone before passport writes
    stderr = probe.stderr.read().decode()
    probe.stderr.close()
    assert probe.wait(30) == 0 and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_recording_references_is_not_a_failure_and_the_recorded_suite_then_passes(
    simulator: SimFactory, tmp_path: Path
) -> None:
    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    suite = tmp_path / "suite.yaml"
    suite.write_text("suite: mine\nversion: 1\ncases:\n"
                     "  - {id: cont, kind: exact, api: completions, prompt: 'The capital of France is', "
                     "max_tokens: 8, expect: {text: 'a placeholder'}}\n")
    recorded = tmp_path / "recorded.yaml"
    args = ("canary", "--endpoint", url, "--out", str(tmp_path / "out"))
    result = run_cli(*args, "--suite", str(suite), "--record", str(recorded))
    # the simulator's completion of 8 tokens is "tok0 tok1 ... tok7 "
    reference = "".join(f"tok{i} " for i in range(8))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"REC   cont  exact        reference recorded: {reference!r}" in result.stdout
    assert "Recorded 1 exact-output references" in result.stdout and "FAIL" not in result.stdout
    again = run_cli(*args, "--suite", str(recorded))
    assert again.returncode == 0 and "PASS  cont" in again.stdout
    unrecorded = run_cli(*args, "--suite", str(suite))
    assert unrecorded.returncode == 1 and "FAIL  cont" in unrecorded.stdout
    # each verdict is printed once: the progress on stderr names cases, not verdicts
    assert "PASS" not in again.stderr and "case 1/1: cont" in again.stderr


def test_integer_histograms_label_whole_values_and_the_mix_says_declared_or_drawn(
    write_spec: WriteSpec, tmp_path: Path
) -> None:
    lengths = {"input_tokens": {"dist": "uniform", "low": 4, "high": 7}}
    workload: dict[str, Any] = {"tokenizer": "none", "mix": [{"name": "a", "weight": 1, "workload": lengths},
                                                             {"name": "b", "weight": 3, "workload": lengths}]}
    spec = write_spec({"name": "w", "endpoint": {"base_url": "http://127.0.0.1:9/v1"}, "workload": workload,
                       "load": {"pattern": "closed", "concurrency": 1, "measure": {"requests": 200}}})
    result = run_cli("workload", str(spec))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("input tokens, target"))
    labels = [line.split()[0] for line in lines[start + 1:start + 5]]
    assert labels == ["4", "5", "6", "7"]  # one bin per value, none labelled "4 - 4"
    assert "mix, as declared: a weight 1 (25% of entries), b weight 3 (75% of entries)" in result.stdout
    assert next(line for line in lines if line.startswith("shapes, as drawn: a ")).count("requests") == 2
