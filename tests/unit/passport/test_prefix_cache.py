"""The prefix-cache policy per engine, against scripted control-plane answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from harness import ControlClient
from passport.model import parse_spec
from passport.run import apply_prefix_cache_policy


def _control(answer: Callable[[httpx.Request], httpx.Response]) -> tuple[ControlClient, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.raw_path.decode()}")
        return answer(request)

    return ControlClient("http://engine:8000/v1", transport=httpx.MockTransport(handle)), seen


def _apply(engine: str, answer: Callable[[httpx.Request], httpx.Response],
           policy: str = "cold") -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    control, seen = _control(answer)
    params: dict[str, Any] = {}
    spec = parse_spec({"endpoint": {"base_url": "http://engine:8000/v1"},
                       "load": {"pattern": "closed", "concurrency": 1}, "prefix_cache": policy}, "test")
    record = apply_prefix_cache_policy(spec, engine, control, "run1", params)
    return record, params, seen


def test_vllm_resets_in_dev_mode_and_salts_otherwise() -> None:
    record, params, seen = _apply("vllm", lambda r: httpx.Response(200))
    assert seen == ["POST /reset_prefix_cache"] and record["method"] == "POST /reset_prefix_cache" and params == {}
    record, params, _ = _apply("vllm", lambda r: httpx.Response(404))
    assert params == {"cache_salt": "passport-run1"} and record["enforced"] and "answered 404" in record["reason"]


def test_salted_keeps_the_shared_cache_and_salts_every_request_where_the_engine_can() -> None:
    for engine in ("vllm", "sglang"):
        record, params, seen = _apply(engine, lambda r: httpx.Response(200), policy="salted")
        assert seen == [] and params == {"cache_salt": "passport-run1"}  # nothing emptied, even where it could be
        assert (record["declared"], record["policy"], record["enforced"]) == ("salted", "cold", True)
        assert record["method"] == "cache_salt=passport-run1 on every request"
    record, params, seen = _apply("llama.cpp", lambda r: httpx.Response(200), policy="salted")
    assert not record["enforced"] and params == {} and seen == [] and "prefix_cache: cold" in record["reason"]


def test_sglang_flush_is_retried_while_requests_drain() -> None:
    answers = iter([400, 400, 200])
    record, params, seen = _apply("sglang", lambda r: httpx.Response(next(answers)))
    assert seen == ["POST /flush_cache"] * 3 and record["method"] == "POST /flush_cache" and params == {}


def test_llama_cpp_erases_every_slot_or_turns_prompt_reuse_off() -> None:
    def erasable(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/slots" and request.method == "GET":
            return httpx.Response(200, json=[{"id": 0}, {"id": 1}])
        return httpx.Response(200, json={"n_erased": 10})

    record, params, seen = _apply("llama.cpp", erasable)
    assert seen[1:] == ["POST /slots/0?action=erase", "POST /slots/1?action=erase"] and params == {}

    def refusing(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=[{"id": 0}])
        return httpx.Response(501, json={"error": {"message": "Start it with `--slot-save-path`"}})

    record, params, _ = _apply("llama.cpp", refusing)
    assert params == {"cache_prompt": False} and "--slot-save-path" in record["reason"]


def test_engines_without_a_reset_say_so_and_warm_resets_nothing() -> None:
    record, params, seen = _apply("tgi", lambda r: httpx.Response(200))
    assert not record["enforced"] and "restart the server" in record["reason"] and seen == [] and params == {}
    record, _, seen = _apply("vllm", lambda r: httpx.Response(200), policy="warm")
    assert record["enforced"] and seen == []


@pytest.mark.parametrize("written,workload,load,policy", [
    # the same synthetic spec twice must meet the same cache: the default empties it
    ({}, {}, {"pattern": "closed", "concurrency": 1}, "cold"),
    # a replayed log keeps the prefixes its own traffic shares
    ({}, {"source": {"path": "log.jsonl"}}, {"pattern": "closed", "concurrency": 1}, "warm"),
    ({"prefix_cache": "warm"}, {}, {"pattern": "closed", "concurrency": 1}, "warm"),
])
def test_auto_is_cold_for_synthetic_workloads_and_warm_for_replayed_logs(
        written: dict[str, Any], workload: dict[str, Any], load: dict[str, Any], policy: str) -> None:
    spec = parse_spec({"endpoint": {"base_url": "http://engine:8000/v1"}, "load": load, "workload": workload,
                       **written}, "test")
    control, seen = _control(lambda r: httpx.Response(200))
    record = apply_prefix_cache_policy(spec, "vllm", control, "run1", {})
    assert (record["declared"], record["policy"]) == (written.get("prefix_cache", "auto"), policy)
    assert seen == (["POST /reset_prefix_cache"] if policy == "cold" else [])
