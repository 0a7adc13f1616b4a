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


def _readme_recipes() -> tuple[str, str]:
    """The README's pandas block and DuckDB query under "Recompute a figure by hand"."""
    text = (REPO / "README.md").read_text().split("### Recompute a figure by hand", 1)[1]
    python = text.split("```python\n", 1)[1].split("```", 1)[0]
    sql = " ".join(text.split("The same in DuckDB: `", 1)[1].split("`.", 1)[0].split())
    return python, sql


def test_the_readmes_recipes_and_the_csv_and_jsonl_exports_give_the_passports_figure(tmp_path: Path) -> None:
    import contextlib
    import io
    import json

    import duckdb
    import pandas as pd

    run = REPO / "tests" / "data" / "runs" / "v1.3"
    p50 = json.loads((run / "passport.json").read_text())["results"]["metrics"]["ttft.any"]["p50"]
    python, sql = _readme_recipes()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(python.replace("results/<run>", str(run)), {})  # noqa: S102 - the README's own code
    assert abs(float(printed.getvalue()) - p50) <= 1e-12
    assert abs(duckdb.sql(sql.replace("results/<run>", str(run))).fetchall()[0][0] - p50) <= 1e-12

    csv_file, jsonl_file = tmp_path / "requests.csv", tmp_path / "requests.jsonl"
    for fmt, path in (("csv", csv_file), ("jsonl", jsonl_file)):
        result = run_cli("export", str(run), "--format", fmt, "--output", str(path))
        assert result.returncode == 0 and f"{path}: " in result.stderr, result.stderr
    # the CSV through DuckDB, the JSON Lines through pandas: the same figure, the same rows
    from_csv = duckdb.sql(sql.replace("results/<run>/requests.parquet", str(csv_file))).fetchall()[0][0]
    assert abs(from_csv - p50) <= 1e-12
    rows = pd.read_json(jsonl_file, lines=True)
    parquet = pd.read_parquet(run / "requests.parquet")
    assert list(rows.columns) == list(parquet.columns) and len(rows) == len(parquet)
    assert (rows.sort_values("request_id").first_token_ns.fillna(-1).astype("int64").tolist()
            == parquet.sort_values("request_id").first_token_ns.fillna(-1).astype("int64").tolist())
    chunks = run_cli("export", str(run), "--table", "chunks", "--format", "jsonl")
    n_chunks = pd.read_parquet(run / "chunks.parquet").shape[0]
    assert chunks.returncode == 0 and len(chunks.stdout.splitlines()) == n_chunks
    assert run_cli("export", str(tmp_path), "--table", "requests").returncode == 2  # not a run folder


def test_export_offers_every_table_the_auditor_exports() -> None:
    from passport.audit import EXPORT_TABLES
    from passport.cli._cmd_export import _TABLES

    assert _TABLES == EXPORT_TABLES  # kept apart so `passport --help` does not import pyarrow
