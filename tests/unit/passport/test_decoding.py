"""Decoding presets as model cards publish them, declared fields on top, managed APIs spared the
open-engine extensions."""

from __future__ import annotations

from typing import Any

import pytest

from passport.model import parse_spec
from passport.run import request_params


def _params(decoding: dict[str, Any], engine: str | None) -> dict[str, Any]:
    spec = parse_spec({"endpoint": {"base_url": "http://x/v1"}, "decoding": decoding,
                       "load": {"pattern": "closed", "concurrency": 1}})
    return request_params(spec, engine)[0]


@pytest.mark.parametrize("preset, expected", [
    ("instruct", {"temperature": 0.7, "top_p": 0.8, "top_k": 20}),
    ("thinking", {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "presence_penalty": 1.5}),
    ("explicit", {}),
])
def test_presets_send_their_published_parameters(preset: str, expected: dict[str, Any]) -> None:
    assert _params({"preset": preset, "ignore_eos": False}, "vllm") == expected


def test_declared_fields_replace_the_preset_s_and_extras_go_verbatim() -> None:
    params = _params({"preset": "thinking", "temperature": 0.6, "presence_penalty": 0.0, "seed": 7,
                      "ignore_eos": False, "extra": {"chat_template_kwargs": {"enable_thinking": True}}}, "sglang")
    assert params == {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "presence_penalty": 0.0, "seed": 7,
                      "chat_template_kwargs": {"enable_thinking": True}}


def test_managed_apis_get_no_top_k_unless_it_is_declared() -> None:
    assert "top_k" not in _params({"preset": "instruct"}, "managed:openai")
    assert _params({"preset": "instruct", "top_k": 5}, "managed:openai")["top_k"] == 5
