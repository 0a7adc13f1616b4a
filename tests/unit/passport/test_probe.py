"""Identity and capacity probes per engine, against response fixtures built from the shapes in
docs/engines/research.md (tests/data/engines/, one per engine and version family); llama.cpp is
also probed live in tests/e2e."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from harness import ControlClient
from passport.run import STANDARD_FIELDS, complete_identity, probe_endpoint
from tests.conftest import REPO

FIXTURES = sorted((REPO / "tests" / "data" / "engines").glob("*.json"))


def _client(fixture: dict[str, Any]) -> ControlClient:
    root = urlparse(fixture["base_url"]).path.removesuffix("/v1")
    routes = fixture["routes"]

    def handle(request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode()
        key = f"{request.method} {path.removeprefix(root)}"
        answer = routes.get(key)
        if answer is None:
            return httpx.Response(404, json={"error": "not found"})
        if "text" in answer:
            return httpx.Response(200, text=answer["text"])
        return httpx.Response(200, json=answer["json"])

    return ControlClient(fixture["base_url"], transport=httpx.MockTransport(handle))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_each_engine_reports_what_its_endpoints_tell_with_the_endpoint_as_source(path: Path) -> None:
    fixture = json.loads(path.read_text())
    with _client(fixture) as control:
        cards = control.models()
        model = str(cards[0]["id"])
        fields = complete_identity(probe_endpoint(control, cards, model, fixture["base_url"]), {})
    for key, (value, via) in fixture["expect"].items():
        assert key in fields, key
        assert (fields[key].value, fields[key].source, fields[key].via) == (value, "probed", via), key
    for key in fixture["unknown"]:
        assert fields[key].source == "unknown" and fields[key].value is None, key
    assert set(STANDARD_FIELDS) <= set(fields)


def test_declared_values_fill_standard_fields_the_endpoint_cannot_tell() -> None:
    fixture = json.loads((REPO / "tests" / "data" / "engines" / "trtllm.json").read_text())
    with _client(fixture) as control:
        cards = control.models()
        probed = probe_endpoint(control, cards, "llama-3.1-8b", fixture["base_url"])
    fields = complete_identity(probed, {"weights_format": "fp8", "kv_cache_dtype": "fp8", "tensor_parallel_size": 2,
                                        "engine_version": "9.9"})
    assert fields["model.quantization"].source == "declared" and fields["model.quantization"].value == "fp8"
    assert fields["engine.tensor_parallel_size"].via == "identity.tensor_parallel_size"
    assert fields["engine.version"].source == "probed" and fields["engine.version"].value == "1.1.0"  # probed wins
    assert fields["declared.engine_version"].value == "9.9"  # but what was declared is kept


def test_tei_is_told_from_tgi_by_its_model_type_and_an_embedder_reports_its_shape() -> None:
    """TEI's /info (router/src/lib.rs `Info`, written out by hand) and an embeddings answer: the
    pooling, the longest input and the dtype from /info, the dimension and normalisation from one
    untimed request of two inputs."""
    info = {"model_id": "BAAI/bge-small-en-v1.5", "model_sha": "5c38ec7", "model_dtype": "float16",
            "model_type": {"embedding": {"pooling": "cls"}}, "max_concurrent_requests": 512,
            "max_input_length": 512, "max_batch_tokens": 16384, "max_batch_requests": None,
            "max_client_batch_size": 32, "auto_truncate": False, "tokenization_workers": 4, "version": "1.7.0",
            "sha": None, "docker_label": None}
    vectors = [[0.6, 0.8, 0.0], [0.0, 0.6, 0.8]]
    fixture = {"base_url": "http://tei:8080/v1", "routes": {
        "GET /info": {"json": info},
        "POST /v1/embeddings": {"json": {"object": "list", "data": [
            {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]}}}}
    with _client(fixture) as control:
        fields = probe_endpoint(control, [], "bge", fixture["base_url"], "embeddings")
    got = {k: (v.value, v.via) for k, v in fields.items()}
    assert got["engine.name"] == ("tei", "/info model_type") and got["engine.version"] == ("1.7.0", "/info")
    assert got["model.pooling"] == ("cls", "/info model_type.embedding.pooling")
    assert got["model.max_context"] == (512, "/info max_input_length")
    assert got["model.dtype"] == ("float16", "/info model_dtype") and got["model.task"][0] == "embedding"
    assert got["model.embedding_dim"][0] == 3 and got["model.embedding_normalized"][0] is True
    tgi = json.loads((REPO / "tests" / "data" / "engines" / "tgi.json").read_text())
    with _client(tgi) as control:  # TGI's /info has no model_type: not taken for TEI
        assert probe_endpoint(control, control.models(), "m", tgi["base_url"])["engine.name"].value == "tgi"
