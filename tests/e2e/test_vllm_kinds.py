"""The pooling kinds live on vLLM's CPU build (issue 46): Gemma 3 270M served as an embedder
(specs/vllm-embeddings.yaml: `--runner pooling --convert embed`), one server for the module,
answering /v1/embeddings, /v1/rerank and /v1/score. The bundled spec's workload, against that
server, for each kind: VALID with its canaries, the engine's own request counter agreeing with the
log (vLLM counts each input, and each document and the query, apart), and the server's tokenizer
agreeing with ours text by text."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import LENIENT_CLIENT, REPO, only_run_dir, run_cli
from tests.e2e.test_vllm import serve

pytestmark = [pytest.mark.e2e, pytest.mark.vllm, pytest.mark.timeout(900)]
SPEC = REPO / "specs" / "vllm-embeddings.yaml"


@pytest.fixture(scope="module")
def embedder_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from serve(SPEC, tmp_path_factory.mktemp("vllm-embed"))


def _run(url: str, api: str, write_spec: Callable[..., Path], out: Path) -> tuple[Path, dict[str, Any]]:
    spec = {k: v for k, v in yaml.safe_load(SPEC.read_text()).items() if k != "engine"}
    spec["endpoint"] = {"base_url": url, "api": api}
    spec["validity"] = {**spec["validity"], **LENIENT_CLIENT}
    if api != "embeddings":  # a query of input_tokens and its documents
        spec["workload"] = {k: v for k, v in spec["workload"].items() if k != "inputs_per_request"} | {
            "documents": {"count": 6, "tokens": {"dist": "uniform", "low": 16, "high": 48}}}
    result = run_cli("run", str(write_spec(spec)), "--out", str(out))
    assert result.returncode == 0 and "Result is: VALID" in result.stdout, result.stdout + result.stderr
    run = only_run_dir(out)
    assert run_cli("verify", str(run)).stdout.startswith("verified")
    return run, json.loads((run / "passport.json").read_text())


def _rule(passport: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in passport["validity"]["rules"] if r["name"] == name)


def test_vllm_serves_embeddings_live_with_its_canaries_and_its_counters_agreeing(
    embedder_url: str, write_spec: Callable[..., Path], tmp_path: Path
) -> None:
    run, passport = _run(embedder_url, "embeddings", write_spec, tmp_path / "out")
    canaries = passport["validity"]["canaries"]
    assert canaries["suite"] == "default-embeddings" and canaries["status"] == "passed"
    ident = passport["identity"]
    assert ident["engine.name"]["value"] == "vllm" and ident["model.id"]["value"] == "gemma3-270m-embed"
    assert ident["model.embedding_dim"]["value"] == 640 and ident["model.embedding_normalized"]["value"] is True
    assert (ident["model.pooling"]["value"], ident["model.pooling"]["source"]) == ("last", "declared")
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert len(measured) == 12 and (measured.outcome == "ok").all()
    assert (measured.n_results == 4).all() and (measured.embedding_dim == 640).all()
    counters = _rule(passport, "server_counters")
    # vLLM finished one request per input: four per answer, in the window (warm-up's and the
    # measured answers'), which the rule allows for and says
    assert counters["status"] == "PASS" and "counting its inputs apart" in counters["message"], counters
    assert counters["measured"].startswith(f"requests {4 * len(requests)} / {len(requests)}"), counters
    check = passport["protocol"]["workload"]["tokenizer_check"]
    assert check["checked"] > 0 and check["agreed"] == check["checked"], check  # input by input


@pytest.mark.parametrize("api", ["rerank", "score"])
def test_vllm_ranks_and_scores_documents_live(
    embedder_url: str, write_spec: Callable[..., Path], tmp_path: Path, api: str
) -> None:
    run, passport = _run(embedder_url, api, write_spec, tmp_path / "out")
    canaries = passport["validity"]["canaries"]
    assert canaries["suite"] == "default-rerank" and canaries["status"] == "passed"  # the relevant one first
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    measured = requests[requests.phase == "measure"]
    assert len(measured) == 12 and (measured.outcome == "ok").all()
    assert (measured.n_inputs == 6).all() and (measured.n_results == 6).all()
    metrics = passport["results"]["metrics"]
    assert metrics["throughput.documents_per_s"]["mean"] == pytest.approx(
        6 * metrics["throughput.requests_per_s"]["mean"])
    counters = _rule(passport, "server_counters")
    # an embedding model scores a query against documents by their embeddings: vLLM finishes
    # the query's and each document's, seven per answer
    assert counters["status"] == "PASS" and "counting its documents and the query apart" in counters["message"]
    assert counters["measured"].startswith(f"requests {7 * len(requests)} / {len(requests)}"), counters
    check = passport["protocol"]["workload"]["tokenizer_check"]
    assert check["checked"] > 0 and check["agreed"] == check["checked"], check  # the query and each document
