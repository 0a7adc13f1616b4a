"""The result files passport writes for guidellm's and AIPerf's users, read by those tools' own
code (installed from the registry into environments of their own by scripts/setup_peers.sh):
guidellm 0.8.1's `GenerativeBenchmarksReport.load_file` and its `guidellm export` (console and
CSV, what its users' dashboards read), AIPerf 0.13's `JsonExportData`. Each figure a reader finds
must be the one `passport show --as TOOL` prints for the same run."""

from __future__ import annotations

import csv
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LENIENT_FLAGS, REPO, SimFactory, only_run_dir, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.peers, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def peers() -> dict[str, Path]:
    """AIPERF and GUIDELLM: each tool's executable in its own cached environment."""
    done = subprocess.run(["bash", "scripts/setup_peers.sh"], cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: Path(path) for name, path in (line.split("=", 1) for line in done.stdout.split())}


def _shown(run: Path, tool: str) -> dict[str, dict[str, float]]:
    """`passport show RUN --as TOOL`: each figure's statistics by the header's column names."""
    text = run_cli("show", str(run), "--as", tool).stdout
    columns: list[str] = []
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if line.startswith("figure "):
            columns = line.split()[1:line.split().index("nearest")]
        row = re.match(r"^(.+?) \([^)]*\)\s+((?:[-\d.,—]+\s+)+)", line)
        if columns and row:
            cells = row.group(2).split()[:len(columns)]
            out[row.group(1)] = {c: float(v.replace(",", "")) for c, v in zip(columns, cells) if v != "—"}
    return out


READ_GUIDELLM = """
import json, sys
from guidellm.benchmark.schemas import GenerativeBenchmarksReport
report = GenerativeBenchmarksReport.load_file(sys.argv[1])
print(json.dumps([{
    "strategy": b.config.strategy.type_,
    "successful": b.metrics.request_totals.successful,
    "ttft_median": b.metrics.time_to_first_token_ms.successful.median,
    "ttft_p99": b.metrics.time_to_first_token_ms.successful.percentiles.p99,
    "itl_median": b.metrics.inter_token_latency_ms.successful.median,
    "latency_mean": b.metrics.request_latency.successful.mean,
    "rps_mean": b.metrics.requests_per_second.successful.mean,
} for b in report.benchmarks]))
"""

READ_AIPERF = """
import json, sys
from aiperf.common.models.export_models import JsonExportData
data = JsonExportData.model_validate_json(open(sys.argv[1]).read())
print(json.dumps({"ttft_avg": data.time_to_first_token.avg, "ttft_p99": data.time_to_first_token.p99,
                  "itl_avg": data.inter_token_latency.avg, "count": data.request_count.avg,
                  "unit": data.time_to_first_token.unit}))
"""


def test_guidellms_reader_and_exporter_take_a_sweeps_report(peers: dict[str, Path], simulator: SimFactory,
                                                              tmp_path: Path) -> None:
    url = simulator("--slots", "2", "--ttft-ms", "20", "--itl-ms", "4")
    report = tmp_path / "report"
    report.mkdir()  # guidellm's --output-path: a folder gets benchmarks.json inside
    done = run_cli("run", "--target", url, "--rate-type", "sweep", "--rate", "4", "--max-requests", "24", "--data",
                   "prompt_tokens=16,output_tokens=8", "--api", "completions", "--tokenizer", "none",
                   "--output-path", str(report), "--quiet", *LENIENT_FLAGS, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    path = report / "benchmarks.json"
    assert f"guidellm report: {path}" in done.stdout
    python = peers["GUIDELLM"].parent / "python"
    read = subprocess.run([str(python), "-c", READ_GUIDELLM, str(path)], capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr[-3000:]
    benchmarks = json.loads(read.stdout)
    # the synchronous probe, the throughput probe (32 users), then two constant rates
    assert [b["strategy"] for b in benchmarks] == ["synchronous", "concurrent", "constant", "constant"]
    (sweep,) = (tmp_path / "out").iterdir()
    summary = json.loads((sweep / "sweep.json").read_text())
    levels = [summary["synchronous_probe"], summary["probe"], *summary["levels"]]
    for level, theirs in zip(levels, benchmarks, strict=True):
        ours = _shown(sweep / "levels" / level["run"], "guidellm")
        assert theirs["successful"] == 24
        assert theirs["ttft_median"] == pytest.approx(ours["time_to_first_token_ms"]["median"], abs=6e-4)
        assert theirs["ttft_p99"] == pytest.approx(ours["time_to_first_token_ms"]["p99"], abs=6e-4)
        assert theirs["itl_median"] == pytest.approx(ours["inter_token_latency_ms"]["median"], abs=6e-4)
        assert theirs["latency_mean"] == pytest.approx(ours["request_latency"]["mean"], abs=6e-4)
        assert theirs["rps_mean"] == pytest.approx(level["throughput_rps"], rel=0.05)
    # the simulator's scripted 20 ms to the first token, 4 ms between tokens
    assert 18 < benchmarks[0]["ttft_median"] < 40 and 3.5 < benchmarks[0]["itl_median"] < 6
    # guidellm's own exporter (what its users' dashboards read) renders it, one CSV row per benchmark
    table = tmp_path / "guidellm.csv"
    exported = subprocess.run([str(peers["GUIDELLM"]), "export", str(path), "--output",
                               f"kind=csv,path={table}", "--output", "kind=console"],
                              capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stdout[-3000:] + exported.stderr[-3000:]
    assert "Request Latency Statistics" in exported.stdout and "synchronous" in exported.stdout
    with table.open() as file:
        rows = list(csv.reader(file))
    assert rows[1][:2] == ["Run ID", "Run Index"] and [r[1] for r in rows[3:]] == ["0", "1", "2", "3"]


def test_aiperfs_reader_takes_the_export(peers: dict[str, Path], simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "20", "--itl-ms", "4")
    done = run_cli("run", "--endpoint", url, "--concurrency", "2", "--num-prompts", "20", "--input-len", "16",
                   "--output-len", "8", "--api", "completions", "--tokenizer", "none", "--quiet", *LENIENT_FLAGS,
                   "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    run = only_run_dir(tmp_path / "out")
    export = tmp_path / "profile_export_aiperf.json"
    assert run_cli("show", str(run), "--as", "aiperf", "--json", "--output", str(export)).returncode == 0
    python = peers["AIPERF"].parent / "python"
    read = subprocess.run([str(python), "-c", READ_AIPERF, str(export)], capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr[-3000:]
    theirs, ours = json.loads(read.stdout), _shown(run, "aiperf")
    assert (theirs["count"], theirs["unit"]) == (20, "ms")
    assert theirs["ttft_avg"] == pytest.approx(ours["Time to First Token"]["avg"], abs=6e-4)
    assert theirs["ttft_p99"] == pytest.approx(ours["Time to First Token"]["p99"], abs=6e-4)
    assert theirs["itl_avg"] == pytest.approx(ours["Inter Token Latency"]["avg"], abs=6e-4)
