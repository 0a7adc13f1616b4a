"""What a performance engineer meets at the command line (issue 14), through the CLI against the
simulator: pipes, the workload summary's histograms and labels, exports, runs from flags, attaching."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LENIENT_CLIENT, LENIENT_FLAGS, REPO, SimFactory, run_cli

pytestmark = pytest.mark.slow  # whole runs against the simulated engine, seconds each

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
    """The pandas block and DuckDB query of docs/audit/recompute.md ("Recompute a figure by hand")."""
    text = (REPO / "docs" / "audit" / "recompute.md").read_text()
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
        result = run_cli("export", str(run), "--format", fmt, "--output", str(path), "--allow-unsigned")  # v1.3
        assert result.returncode == 0 and f"{path}: " in result.stderr, result.stderr
    # the CSV through DuckDB, the JSON Lines through pandas: the same figure, the same rows
    from_csv = duckdb.sql(sql.replace("results/<run>/requests.parquet", str(csv_file))).fetchall()[0][0]
    assert abs(from_csv - p50) <= 1e-12
    rows = pd.read_json(jsonl_file, lines=True)
    parquet = pd.read_parquet(run / "requests.parquet")
    assert list(rows.columns) == list(parquet.columns) and len(rows) == len(parquet)
    assert (rows.sort_values("request_id").first_token_ns.fillna(-1).astype("int64").tolist()
            == parquet.sort_values("request_id").first_token_ns.fillna(-1).astype("int64").tolist())
    chunks = run_cli("export", str(run), "--table", "chunks", "--format", "jsonl", "--allow-unsigned")
    n_chunks = pd.read_parquet(run / "chunks.parquet").shape[0]
    assert chunks.returncode == 0 and len(chunks.stdout.splitlines()) == n_chunks
    assert run_cli("export", str(tmp_path), "--table", "requests").returncode == 2  # not a run folder


def test_export_offers_every_table_the_auditor_exports() -> None:
    from passport.audit import EXPORT_TABLES
    from passport.cli._cmd_export import _TABLES

    assert _TABLES == EXPORT_TABLES  # kept apart so `passport --help` does not import pyarrow


FLAGS = ("--concurrency", "2", "--num-prompts", "6", "--input-len", "8", "--output-len", "4", "--set", "canaries=none",
         "--set", "workload.tokenizer=none", *LENIENT_FLAGS)


def test_a_run_from_flags_alone_is_recorded_and_its_spec_yaml_runs_it_again(
    simulator: SimFactory, tmp_path: Path
) -> None:
    import json

    import pyarrow.parquet as pq

    from tests.conftest import only_run_dir

    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    first = run_cli("run", "--endpoint", url, *FLAGS, "--out", str(tmp_path / "a"), "--quiet")
    assert first.returncode == 0, first.stdout + first.stderr
    run = only_run_dir(tmp_path / "a")
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    # the simulator answers max_tokens tokens: --output-len 4 reached it as max_tokens 4
    assert len(requests) == 6 and (requests.completion_tokens == 4).all() and (requests.max_tokens == 4).all()
    passport = json.loads((run / "passport.json").read_text())
    effective = passport["protocol"]["effective"]
    assert effective["load"]["pattern"] == "closed" and effective["load"]["concurrency"] == 2
    assert effective["workload"]["input_tokens"] == {**effective["workload"]["input_tokens"], "dist": "fixed",
                                                     "value": 8}
    sources = {o["field"]: o["source"] for o in passport["protocol"]["overrides"]}
    assert sources["load.concurrency"] == "--concurrency" and sources["canaries"] == "--set canaries"
    assert "spec.yaml" in passport["files"] and run_cli("verify", str(run)).returncode == 0
    again = run_cli("run", str(run / "spec.yaml"), "--out", str(tmp_path / "b"), "--quiet")
    assert again.returncode == 0, again.stdout + again.stderr
    second = json.loads((only_run_dir(tmp_path / "b") / "passport.json").read_text())
    for part in ("workload", "schedule"):  # the same offered load, byte for byte
        assert second["protocol"][part]["sha256"] == passport["protocol"][part]["sha256"]
    assert second["protocol"]["effective"] == effective


def test_an_open_loop_from_flags_and_the_flags_mistakes(simulator: SimFactory, tmp_path: Path) -> None:
    import json

    from tests.conftest import only_run_dir

    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    result = run_cli("run", "--endpoint", url, "--rate", "50", "--arrival", "constant", "--concurrency", "3",
                     "--duration", "0.5", *FLAGS[4:], "--out", str(tmp_path / "o"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    load = json.loads((only_run_dir(tmp_path / "o") / "passport.json").read_text())["protocol"]["effective"]["load"]
    assert (load["pattern"], load["rate_per_s"], load["concurrency"], load["measure"]["duration_s"]) == (
        "constant", 50.0, 3, 0.5)
    for args, said in [
        ((), "give a spec, or run from flags alone: --endpoint URL (or vLLM's --base-url, guidellm's --target)"),
        (("--endpoint", url, "--concurrency", "2", "--num-prompts", "4", "--duration", "3"),
         "give --num-prompts or --duration, not both"),
        (("--endpoint", url, "--concurrency", "2", "--set", "load.concurrency"), "--set 'load.concurrency': write"),
        (("--endpoint", url, "--concurrency", "2", "--set", "load.concurency=3"),
         "load.concurency: unknown field; did you mean 'concurrency'?"),
        (("--endpoint", url, "--rate", "inf"), "--rate inf sends every request at once: give --num-prompts N"),
        (("--endpoint", url, "--rate", "0"), "--rate 0.0: give requests per second above 0, or inf"),
    ]:
        bad = run_cli("run", *args, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, (args, bad.stderr)
    assert not (tmp_path / "bad").exists()


def test_vllm_and_sglang_flag_names_and_a_burst_mean_what_they_mean_there(simulator: SimFactory,
                                                                          tmp_path: Path) -> None:
    import json

    from tests.conftest import only_run_dir

    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    host_port = url.removeprefix("http://").removesuffix("/v1")

    def load_of(out: str, *args: str) -> tuple[dict[str, object], dict[str, str], str]:
        result = run_cli("run", "--endpoint", host_port, *args, *FLAGS[4:], "--out", str(tmp_path / out))
        assert result.returncode == 0, result.stdout + result.stderr
        passport = json.loads((only_run_dir(tmp_path / out) / "passport.json").read_text())
        sources = {o["field"]: o["source"] for o in passport["protocol"]["overrides"]}
        assert passport["protocol"]["effective"]["endpoint"]["base_url"] == url  # HOST:PORT is http://HOST:PORT/v1
        return passport["protocol"]["effective"]["load"], sources, result.stderr

    load, _, said = load_of("r", "--request-rate", "40", "--max-concurrency", "3", "--num-prompts", "6")
    assert (load["pattern"], load["rate_per_s"], load["concurrency"]) == ("poisson", 40.0, 3)
    # the defaults a flag user never wrote are said before timing
    line = next(x for x in said.splitlines() if x.startswith("passport: requests: "))
    assert "chat API (the default; --api completions sends the prompt as is)" in line
    assert "sampling temperature=0.7, top_p=0.8, top_k=20 (preset 'instruct', the default" in line
    assert "the chat template adds tokens the server counts" in line
    assert "passport: prefix cache cold (auto: a synthetic workload starts from an empty cache" in said
    # vLLM's --request-rate inf: every request due at once, as many in flight as the cap lets
    load, sources, _ = load_of("b", "--request-rate", "inf", "--num-prompts", "6")
    assert (load["pattern"], load["concurrency"], load["rate_per_s"]) == ("closed", 6, None)
    assert sources["load.concurrency"] == "--rate inf: every request due at once, 6 in flight"
    load, _, _ = load_of("c", "--rate", "inf", "--max-concurrency", "2", "--num-prompts", "6")
    assert (load["pattern"], load["concurrency"]) == ("closed", 2)
    probe = run_cli("probe", host_port)
    assert probe.returncode == 0 and "passport-simulator" in probe.stdout, probe.stderr


def test_endpoint_on_a_launching_spec_attaches_to_the_running_server(
    simulator: SimFactory, write_spec: WriteSpec, tmp_path: Path
) -> None:
    import json

    from tests.conftest import free_port, only_run_dir

    url = simulator("--ttft-ms", "1", "--itl-ms", "1")
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    # a launch command that cannot start: attaching must never run it
    engine = {"launch": "/bin/false {port}", "port": port}
    spec = write_spec({"name": "attach", "engine": engine, "canaries": "none",
                       "workload": {"tokenizer": "none", "output_tokens": {"dist": "fixed", "value": 4}},
                       "load": {"pattern": "closed", "concurrency": 1, "measure": {"requests": 3}},
                       "validity": LENIENT_CLIENT})
    for how in (("--endpoint", url), ("--no-launch",)):
        out = tmp_path / how[0].strip("-")
        result = run_cli("run", str(spec), *how, "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stdout + result.stderr
        run = only_run_dir(out)
        passport = json.loads((run / "passport.json").read_text())
        assert passport["identity"]["engine.name"]["value"] == "passport-simulator"
        assert not (run / "engine.log").exists() and passport["protocol"]["effective"].get("engine") is None
        assert any(o["field"] == "engine" and "attached to the running server" in o["source"]
                   for o in passport["protocol"]["overrides"])
    # no server on the engine's port: an input error naming where it looked, and still no launch
    spec.write_text(spec.read_text().replace(f"port: {port}", f"port: {free_port()}"))
    missing = run_cli("run", str(spec), "--no-launch", "--out", str(tmp_path / "none"))
    assert missing.returncode == 2 and "cannot reach http://127.0.0.1:" in missing.stderr
    spec.write_text(spec.read_text().replace("port:", "health_timeout_s: 5\n  # port:"))
    unplaced = run_cli("run", str(spec), "--no-launch", "--out", str(tmp_path / "none"))
    assert unplaced.returncode == 2 and "pass --endpoint URL of the running server" in unplaced.stderr


def _figures(stdout: str) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """`passport show --as`: ({total: value}, {figure without its unit: {column: value}})."""
    import re

    lines = stdout.splitlines()[1:]
    header = next(i for i, line in enumerate(lines) if line.startswith("figure "))
    totals = {}
    for line in lines[:header]:
        name, value = re.match(r"(.+?):\s+([\d,.]+)\s", line).groups()  # type: ignore[union-attr]
        totals[name] = float(value.replace(",", ""))
    columns = lines[header].split()[1:-5]
    rows = {}
    for line in lines[header + 1:]:
        name, *cells = re.split(r"\s{2,}", line.strip())
        rows[name.rsplit(" (", 1)[0]] = {c: float(x.replace(",", "")) for c, x in zip(columns, cells) if x != "—"}
    return totals, rows


def test_each_tools_view_gives_the_figures_its_definitions_imply_for_a_scripted_stream(
    simulator: SimFactory, tmp_path: Path
) -> None:
    import pandas as pd

    from tests.conftest import only_run_dir

    # the simulator sends the role chunk at once, the 1st of 6 tokens at 40 ms, then one every 10 ms
    url = simulator("--ttft-ms", "40", "--itl-ms", "10")
    result = run_cli("run", "--endpoint", url, *FLAGS[:4], "--output-len", "6", *FLAGS[8:],
                     "--concurrency", "1", "--num-prompts", "10", "--out", str(tmp_path / "o"), "--quiet")
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(tmp_path / "o")
    views, totals = {}, {}
    for tool in ("vllm", "sglang", "aiperf", "guidellm"):
        shown = run_cli("show", str(run), "--as", tool)
        assert shown.returncode == 0, shown.stderr
        totals[tool], views[tool] = _figures(shown.stdout)

    def near(value: float, want: float, within: float = 0.15) -> bool:
        return abs(value - want) <= within * want

    vllm, sglang, aiperf, guidellm = (views[t] for t in ("vllm", "sglang", "aiperf", "guidellm"))
    # vLLM: TTFT at the role chunk, so its TPOT spreads 90 ms over 5 tokens
    assert vllm["TTFT"]["median"] < 10 and near(vllm["TPOT"]["median"], 90 / 5)
    assert near(vllm["E2EL"]["median"], 90) and near(vllm["ITL"]["median"], 10)
    # SGLang and AIPerf: TTFT at the first content, TPOT the 10 ms the script spaces tokens by
    assert near(sglang["TTFT"]["median"], 40) and near(sglang["TPOT"]["median"], 10)
    assert near(sglang["E2E Latency"]["median"], 90)
    assert near(aiperf["Inter Token Latency"]["p75"], 10) and near(aiperf["Request Latency"]["avg"], 90)
    assert set(aiperf["Time to First Token"]) == {"avg", "min", "max", "p99", "p90", "p75", "std"}
    assert near(aiperf["Output Token Throughput Per User"]["avg"], 100)  # one token per 10 ms
    # guidellm: time per output token includes TTFT: 90 ms over 6 tokens; its request latency is in seconds
    assert near(guidellm["time_per_output_token_ms"]["median"], 90 / 6)
    assert near(guidellm["inter_token_latency_ms"]["median"], 10) and near(guidellm["request_latency"]["median"], 0.09)
    # the totals vLLM prints: 10 requests one at a time, 6 tokens each, prompts as the server counted them
    v = totals["vllm"]
    assert (v["Successful requests"], v["Failed requests"], v["Total generated tokens"]) == (10, 0, 60)
    assert near(v["Benchmark duration (s)"], 10 * 0.09, 0.5)
    assert near(v["Output token throughput (tok/s)"], 60 / v["Benchmark duration (s)"], 0.01)
    assert near(totals["aiperf"]["Output Token Throughput (tokens/sec)"], v["Output token throughput (tok/s)"], 0.01)
    assert "output_tokens_per_second" in totals["guidellm"] and "Concurrency" in totals["sglang"]

    # the same from the raw logs, by hand: vLLM's TTFT is the first event with choices less (sent - connect)
    requests = pd.read_parquet(run / "requests.parquet")
    chunks = pd.read_parquet(run / "chunks.parquet")
    ok = requests[(requests.phase == "measure") & requests.outcome.isin(["ok", "truncated"])].set_index("request_id")
    start = ok.sent_ns - ok.connect_ns.fillna(0)
    first = chunks[chunks.kind.astype(str).isin(["empty", "content", "reasoning", "tool_call"])].groupby(
        "request_id").recv_ns.min()
    by_hand = ((first.loc[ok.index] - start) / 1e6).to_numpy()
    assert abs(float(pd.Series(by_hand).median()) - vllm["TTFT"]["median"]) < 0.001
    # vLLM's peak concurrency, as its serve.py counts it: each request in every whole second it touches
    last = chunks[chunks.kind.astype(str).isin(["empty", "content", "reasoning", "tool_call"])].groupby(
        "request_id").recv_ns.max().loc[ok.index]
    seconds: dict[int, int] = {}
    for sent, ended in zip((start - start.min()) // 10**9, (last - start.min()) // 10**9, strict=True):
        for second in range(int(sent), int(ended) + 1):
            seconds[second] = seconds.get(second, 0) + 1
    assert v["Peak concurrent requests"] == max(seconds.values()) > 1  # 10 one at a time in about a second
    wall_s = (ok.end_ns.max() - start.min()) / 1e9
    assert abs(len(ok) / wall_s - v["Request throughput (req/s)"]) < 0.001
    assert v["Total input tokens"] == ok.prompt_tokens.sum()

    # tokens/s per user, a passport metric: 6 tokens from the first at 40 ms to the end at 90 ms
    import json

    passport = json.loads((run / "passport.json").read_text())
    speed = passport["results"]["metrics"]["tps.user"]
    assert near(speed["p50"], 6 / 0.050) and speed["n"] == 10
    by_hand = ok.completion_tokens / ((ok.end_ns - ok.first_token_ns) / 1e9)
    assert abs(float(by_hand.median()) - speed["p50"]) < 1e-9
    gate = run_cli("gate", str(run), "--require", "tps.user.p50 >= 100", "--require", "tps.user.min > 1000")
    assert gate.returncode == 1 and "PASS  tps.user.p50 >= 100" in gate.stdout and "FAIL  tps.user.min" in gate.stdout
    assert "Speed per user (tokens/s)" in (run / "report.md").read_text()


def test_show_offers_every_tool_the_auditor_can_view() -> None:
    from passport.audit import TOOLS
    from passport.cli._cmd_show import _TOOLS

    assert _TOOLS == TOOLS  # kept apart so `passport --help` does not import pyarrow
