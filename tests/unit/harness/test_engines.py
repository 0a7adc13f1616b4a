"""The engine registry: a fictional engine, added as one profile and nothing else, is detected,
probed, sent its own fields, has its cache reset, its metrics scraped and normalized and its
tokenize route used, by the same engine-neutral code every real engine goes through."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness import ControlClient, engines
from harness._telemetry import _normalize
from passport.model import parse_spec
from passport.run import access, apply_prefix_cache_policy, probe_endpoint, request_params
from passport.run._telemetry import choose_sources
from passport.run._tokenize_check import tokenizer_check

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


def _probe(p: engines.ProbeContext) -> None:
    p.put("engine.version", (p.control.get_json("/fiction/version") or {}).get("v"), "/fiction/version")


def _reset(control: ControlClient, run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    params["fiction_cache"] = run_id
    return {"enforced": True, "method": "fiction_cache per run"}


FICTION = engines.EngineProfile(
    name="fiction", owned_by=("fiction-ai",), fingerprint=re.compile(r"^fic-\d+$"), probe=_probe, ignore_eos=True,
    structured_output=lambda schema, api: ({"fiction_schema": schema}, "fiction_schema"),
    reset_prefix_cache=_reset, prometheus_path="/fiction/metrics",
    series={"requests_running": ("fiction_running",)},
    tokenize=engines.TokenizeRoute("/fiction/tokenize", lambda text, model: {"words": text}),
)


@pytest.fixture
def fiction() -> Iterator[engines.EngineProfile]:
    engines.register(FICTION)
    yield FICTION
    engines.unregister(FICTION.name)


def _control(owned_by: str = "fiction-ai") -> tuple[ControlClient, list[str]]:
    seen: list[str] = []
    routes: dict[str, httpx.Response] = {
        "GET /v1/models": httpx.Response(200, json={"data": [{"id": "m", "owned_by": owned_by}]}),
        "GET /fiction/version": httpx.Response(200, json={"v": "9.9"}),
        "GET /fiction/metrics": httpx.Response(200, text="fiction_running 3\n"),
        "POST /fiction/tokenize": httpx.Response(200, json={"count": 2}),
    }

    def handle(request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.raw_path.decode()}"
        seen.append(key)
        return routes.get(key, httpx.Response(404))

    return ControlClient("http://engine:1/v1", transport=httpx.MockTransport(handle)), seen


def test_a_fictional_engine_is_served_by_its_profile_alone(fiction: engines.EngineProfile) -> None:
    control, seen = _control()
    identity = probe_endpoint(control, control.models(), "m", "http://engine:1/v1")
    assert identity["engine.name"].value == "fiction" and identity["engine.name"].via == "/v1/models owned_by"
    assert identity["engine.version"].value == "9.9" and identity["engine.version"].via == "/fiction/version"
    spec = parse_spec({"endpoint": {"base_url": "http://engine:1/v1"}, "load": {"pattern": "closed",
                                                                               "concurrency": 1}})
    params, is_target = request_params(spec, "fiction")
    assert params["ignore_eos"] is True and is_target
    assert engines.structured_fields(SCHEMA, "fiction", "chat") == ({"fiction_schema": SCHEMA}, "fiction_schema")
    record = apply_prefix_cache_policy(spec, "fiction", control, "run1", params)
    assert record == {"declared": "auto", "policy": "cold", "enforced": True, "method": "fiction_cache per run",
                      "chosen": "auto: a synthetic workload starts from an empty cache, so a repeated run meets the "
                                "same state"}
    assert params["fiction_cache"] == "run1"
    sources, info = choose_sources(spec, "fiction", control, access(spec, {}))
    assert info["sources"][0] == "prometheus http://engine:1/fiction/metrics"
    assert ("engine", "requests_running", 3.0) in _normalize({"fiction_running": [3.0]})
    check = tokenizer_check(control, "fiction", "m", [(0, ["two words"], 2)])
    assert check["endpoint"] == "http://engine:1/fiction/tokenize" and check["agreed"] == 1
    assert "POST /fiction/tokenize" in seen
    for source in sources:
        source.close()


def test_a_fictional_engine_is_recognized_by_its_fingerprint(fiction: engines.EngineProfile) -> None:
    assert engines.engine_of_fingerprint("fic-12") == "fiction"
    assert engines.engine_of_card({"owned_by": "fiction-ai"}) == "fiction"


def test_without_its_profile_the_same_endpoint_is_an_unknown_engine() -> None:
    control, _ = _control()
    identity = probe_endpoint(control, control.models(), "m", "http://engine:1/v1")
    assert "engine.name" not in identity
    assert engines.structured_fields(SCHEMA, "fiction", "chat")[1] == "response_format json_schema"


def test_a_name_cannot_be_registered_twice(fiction: engines.EngineProfile) -> None:
    with pytest.raises(ValueError, match="already registered"):
        engines.register(fiction)


def test_every_built_in_profile_names_a_distinct_engine_and_owned_by() -> None:
    names = [p.name for p in engines.profiles()]
    owned = [o for p in engines.profiles() for o in p.owned_by]
    assert len(names) == len(set(names)) and len(owned) == len(set(owned))
    # an MLX fingerprint also fits TGI's pattern: the registry's order must try MLX first
    assert engines.engine_of_fingerprint("0.28.2-0.29.1-macOS-15.5-arm64-applegpu_g15s") == "mlx"
    assert engines.engine_of_fingerprint("3.3.4-native") == "tgi"
