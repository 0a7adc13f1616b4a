"""End to end against MLX's CPU build (scripts/setup_mlx.sh), launched by passport itself from the
bundled spec: every quirk of mlx_lm.server met on the way (a model listed by its path, keep-alive
comments before the first token, HTTP/1.0, no metrics, no tokenizer route, no cache reset) gives a
VALID passport that says what it could not know."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import CACHE, LENIENT_FLAGS, REPO, only_run_dir, run_cli

pytestmark = [pytest.mark.e2e, pytest.mark.mlx, pytest.mark.timeout(600)]
MLX_LM = REPO / ".venv" / "bin" / "mlx_lm"
MODEL_DIR = CACHE / "models" / "gemma-3-270m-bf16"


def _installed() -> tuple[str, str]:
    """(mlx_lm, mlx) versions as the MLX environment's own package metadata has them."""
    python = MLX_LM.resolve().parent / "python"
    out = subprocess.run([str(python), "-c", "from importlib.metadata import version as v; "
                          "print(v('mlx-lm'), v('mlx'))"], capture_output=True, text=True, check=True)
    mlx_lm, mlx = out.stdout.split()
    return mlx_lm, mlx


def test_the_bundled_spec_launches_mlx_and_says_what_it_cannot_measure(tmp_path: Path) -> None:
    if not (MLX_LM.exists() and (MODEL_DIR / "model.safetensors").is_file()):
        pytest.fail(f"{MLX_LM} or {MODEL_DIR} is missing: run scripts/setup_mlx.sh (scripts/test.sh does)")
    result = run_cli("run", str(REPO / "specs" / "mlx-smoke.yaml"), "--out", str(tmp_path / "out"), "--quiet",
                     *LENIENT_FLAGS, timeout_s=500)
    assert result.returncode == 0, result.stdout + result.stderr
    run = only_run_dir(tmp_path / "out")
    passport: dict[str, Any] = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["verdict"] == "VALID"
    canaries = passport["validity"]["canaries"]  # the same bf16 answers vLLM gives
    assert (canaries["status"], canaries["suite"], canaries["n_cases"]) == ("passed", "gemma3-270m-bf16", 5)
    ident = {k: (v["value"], v.get("via")) for k, v in passport["identity"].items()}
    mlx_lm, mlx = _installed()
    assert ident["engine.name"] == ("mlx", "system_fingerprint")
    assert ident["engine.version"] == (mlx_lm, "system_fingerprint (mlx_lm version)")
    assert ident["engine.mlx_version"] == (mlx, "system_fingerprint (mlx version)")
    assert ident["model.root"] == (str(MODEL_DIR.resolve()), "/v1/models id (the served folder)")
    assert ident["engine.binary"][0] == str(MLX_LM.resolve())
    assert passport["identity"]["capacity.kv_tokens"]["source"] == "unknown"
    prefix = passport["protocol"]["prefix_cache"]
    assert prefix["enforced"] is False and "no prefix-cache reset over HTTP" in prefix["reason"]
    assert passport["protocol"]["workload"]["tokenizer_check"]["note"] == "not checked: mlx has no tokenize route"
    assert passport["protocol"]["telemetry"]["sources"] == []
    rules = {r["name"]: r["status"] for r in passport["validity"]["rules"]}
    assert rules["exact_input_lengths"] == "PASS" and rules["server_counters"] == "SKIP"  # the folder's tokenizer
    # its keep-alive comments arrive at once: the first byte, never the first token
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    assert ((requests.first_byte_ns - requests.sent_ns) * 10 < requests.first_token_ns - requests.sent_ns).all()
    assert (requests.completion_tokens <= 8).all() and requests.completion_tokens.sum() > 0  # a cap: no ignore_eos
