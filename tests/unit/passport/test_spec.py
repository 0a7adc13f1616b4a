from __future__ import annotations

import re
from pathlib import Path

import pytest

from passport import SpecError, load_spec, parse_spec
from passport.audit import parse_duration_s

DESIGN = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "design.md"



def test_the_canonical_design_example_parses(tmp_path: Path) -> None:
    block = re.search(r"```yaml\n(name: chat-smoke.*?)```", DESIGN.read_text(), re.S)
    assert block is not None, "docs/concepts/design.md lost its canonical spec"
    path = tmp_path / "spec.yaml"
    path.write_text(block.group(1))
    spec, raw = load_spec(path)
    assert spec.load.rate_per_s == 2.0 and spec.workload.input_tokens.mean == 512
    assert raw["slo"] == {"ttft.any.p99": "2s", "tpot.p99": "200ms"}


def test_a_three_line_spec_runs_on_defaults() -> None:
    spec = parse_spec({"endpoint": {"base_url": "http://h/v1"}, "load": {"pattern": "closed", "concurrency": 1}})
    assert spec.endpoint.api == "chat" and spec.workload.tokenizer == "auto"
    assert spec.load.measure.duration_s == 60 and spec.validity.max_error_rate == 0.01


def test_unknown_field_names_the_field_and_suggests_the_fix() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"endpoint": {"base_url": "http://h:1/v1", "api_kye_env": "K"},
                    "load": {"pattern": "closed", "concurrency": 1}}, "bad.yaml")
    assert str(err.value) == (
        "invalid spec bad.yaml:\n  endpoint.api_kye_env: unknown field; did you mean 'api_key_env'?"
    )


def test_wrong_type_names_the_field_and_value() -> None:
    with pytest.raises(SpecError, match=r"load.rate_per_s: Input should be a valid number.*\(got 'fast'\)"):
        parse_spec({"endpoint": {"base_url": "x"}, "load": {"pattern": "poisson", "rate_per_s": "fast"}})


def test_open_loop_without_rate_says_how_to_fix() -> None:
    fix = "needs load.rate_per_s > 0; for a fixed number of users set load.pattern: closed"
    with pytest.raises(SpecError, match=fix):
        parse_spec({"endpoint": {"base_url": "x"}, "load": {"pattern": "poisson"}})


def test_missing_endpoint_and_engine_is_an_error() -> None:
    with pytest.raises(SpecError, match="endpoint.base_url is required"):
        parse_spec({"load": {"pattern": "closed", "concurrency": 1}})


def test_yaml_errors_and_missing_files_are_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("load: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(bad)
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "missing.yaml")


@pytest.mark.parametrize("text,seconds", [("2s", 2.0), ("200ms", 0.2), ("150us", 150e-6), ("1m", 60.0), (0.5, 0.5)])
def test_durations(text: str | float, seconds: float) -> None:
    assert parse_duration_s(text) == pytest.approx(seconds)


def test_a_leading_cache_mark_follows_passport_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The bundled specs name the model as `{cache}/models/...`: where scripts/setup.sh put it,
    $PASSPORT_CACHE or ~/.cache/passport, not a path that exists only on the default."""
    monkeypatch.setenv("PASSPORT_CACHE", str(tmp_path))
    raw = {"name": "c", "engine": {"launch": "x --port {port}", "model_path": "{cache}/models/m.gguf"},
           "workload": {"tokenizer": "gguf:{cache}/models/m.gguf"}, "load": {"pattern": "closed", "concurrency": 1}}
    spec = parse_spec(raw)
    assert spec.engine is not None and spec.engine.model_path == f"{tmp_path}/models/m.gguf"
    assert spec.workload.tokenizer == f"gguf:{tmp_path}/models/m.gguf"
    monkeypatch.delenv("PASSPORT_CACHE")
    assert parse_spec(raw).workload.tokenizer == f"gguf:{Path.home()}/.cache/passport/models/m.gguf"
    kept = {**raw, "engine": {"launch": "x", "model_path": "/data/{cache}/m.gguf"}, "workload": {"tokenizer": "none"}}
    assert parse_spec(kept).engine.model_path == "/data/{cache}/m.gguf"  # type: ignore[union-attr]
