"""The endpoint kinds past chat on the real engine (issue 46): llama-server serving Gemma 3 270M
as an embedder (`--embeddings --pooling mean`), and its own /v1/responses and /v1/messages
streams. llama.cpp's /v1/rerank needs a reranker GGUF, which no package on the registry carries,
so llama.cpp's rerank runs against the simulator only; vLLM serves rerank and score live
(test_vllm_kinds.py, docs/performance/endpoint-kinds.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import LENIENT_CLIENT, only_run_dir, run_cli
from tests.e2e.test_llamacpp import LAUNCH

pytestmark = pytest.mark.e2e


def _spec(gguf: Path, api: str, launch: str = LAUNCH) -> dict[str, object]:
    return {
        "name": f"e2e-{api}",
        "engine": {"launch": launch, "model_path": str(gguf)},
        "endpoint": {"api": api},
        "workload": {"tokenizer": "auto", "input_tokens": {"dist": "uniform", "low": 16, "high": 32},
                     "output_tokens": {"dist": "fixed", "value": 8}},
        "load": {"pattern": "closed", "concurrency": 2, "warmup": {"requests": 1}, "measure": {"requests": 6}},
        "validity": {"max_error_rate": 0.0, **LENIENT_CLIENT},
    }


def test_llamacpp_serves_embeddings_live_with_its_canaries_passed(
    gguf_path: Path, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    spec = _spec(gguf_path, "embeddings", LAUNCH + " --embeddings --pooling mean")
    spec["workload"] = {**spec["workload"], "inputs_per_request": 3}  # type: ignore[dict-item]
    result = run_cli("run", str(write_spec(spec)), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Result is: VALID" in result.stdout
    run = only_run_dir(tmp_path / "out")
    assert run_cli("verify", str(run)).stdout.startswith("verified")
    passport = json.loads((run / "passport.json").read_text())
    canaries = passport["validity"]["canaries"]
    assert canaries["suite"] == "default-embeddings" and canaries["status"] == "passed" and canaries["n_cases"] == 3
    ident = passport["identity"]
    assert ident["model.embedding_dim"]["value"] == 640  # Gemma 3 270M's hidden size
    assert ident["model.embedding_normalized"]["value"] is True  # llama-server normalises (L2) by default
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert len(measured) == 6 and (measured.outcome == "ok").all()
    assert (measured.n_results == 3).all() and (measured.embedding_dim == 640).all()
    # the server's count of the three inputs' tokens: ours (exact under the GGUF's tokenizer) plus
    # what it adds to each input (BOS, at least), never less
    assert (measured.prompt_tokens >= measured.input_tokens_client).all()
    metrics = passport["results"]["metrics"]
    assert metrics["throughput.inputs_per_s"]["mean"] == pytest.approx(3 * metrics["throughput.requests_per_s"]["mean"])
    assert metrics["e2e"]["n"] == 6 and metrics["ttft.any"]["n"] == 0
    table = pq.read_table(run / "canaries.parquet").to_pandas().set_index("case_id")
    found = re.fullmatch(r"paraphrase (\S+), unrelated (\S+)", table.loc["paraphrase-closer", "actual"])
    assert found is not None
    near, far = float(found.group(1)), float(found.group(2))
    assert -1 <= far < near <= 1  # the real model's cosines, the paraphrase nearer


@pytest.mark.parametrize("api", ["responses", "anthropic_messages"])
def test_llamacpp_streams_responses_and_messages_live(
    gguf_path: Path, write_spec: Callable[..., Path], tmp_path: Path, api: str
) -> None:
    result = run_cli("run", str(write_spec(_spec(gguf_path, api))), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Result is: VALID" in result.stdout
    run = only_run_dir(tmp_path / "out")
    assert run_cli("verify", str(run)).stdout.startswith("verified")
    passport = json.loads((run / "passport.json").read_text())
    assert passport["validity"]["canaries"]["status"] == "passed"  # the accounting cases, in this kind's events
    metrics = passport["results"]["metrics"]
    for metric_id in ("ttft.any", "itl.chunk", "tpot", "e2e"):
        assert metrics[metric_id]["n"] > 0 and metrics[metric_id]["p50"] > 0, metric_id
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert (measured.tokens_source == "server").all() and (measured.completion_tokens <= 8).all()
    assert (measured.prompt_tokens > measured.input_tokens_client).all()  # the chat template's tokens too
    chunks = pq.read_table(run / "chunks.parquet").to_pandas()
    wanted = "response.output_text.delta" if api == "responses" else "content_block_delta"
    assert (chunks[chunks.token_bearing].event == wanted).all()
