"""Each traffic shape materializes with its declared structure, reproducibly (hand-checkable
properties: turn structure, shares, schemas, image sizes, corpus text, mix weights)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow.parquet as pq
import pytest
from PIL import Image
from pydantic import ValidationError

from workloads import (
    DEFAULT_SCHEMA,
    DEFAULT_TOOLS,
    WorkloadSpec,
    corpus_text,
    entry_rows,
    load_tokenizer,
    materialize,
    png_bytes,
    preset_names,
)

NONE = load_tokenizer("none")


def _set(data: dict[str, Any], n: int = 40, seed: int = 3) -> Any:
    return materialize(WorkloadSpec.model_validate({"tokenizer": "none", **data}), n, NONE, seed)


def test_sessions_expand_to_consecutive_turns_with_think_times() -> None:
    rs = _set({"sessions": {"turns": {"dist": "uniform", "low": 2, "high": 5},
                            "think_time_s": {"dist": "exponential", "mean": 1.5}},
               "input_tokens": {"dist": "fixed", "value": 12}}, n=50)
    df = rs.table.to_pandas()
    assert df.session.nunique() == 50 and set(df["shape"]) == {"multi_turn"}
    for _, turns in df.groupby("session"):
        assert list(turns.turn) == list(range(len(turns)))  # 0..K-1, consecutive rows
        assert list(turns.index) == list(range(turns.index[0], turns.index[0] + len(turns)))
        assert turns.think_time_s.iloc[0] == 0.0
    sizes = df.groupby("session").size()
    assert sizes.between(2, 5).all() and sizes.nunique() > 1
    later = df.think_time_s[df.turn > 0]
    assert (later > 0).all() and 0.9 < later.mean() < 2.2  # exponential, mean 1.5 s
    assert list(entry_rows(rs.table)) == list(df.index[df.turn == 0])
    assert (df.input_tokens_target == 12).all()


def test_shares_of_structured_output_and_tools_carry_their_fields() -> None:
    rs = _set({"structured_output": {"share": 0.3}, "tools": {"share": 0.4, "tool_choice": "auto"}}, n=400)
    df = rs.table.to_pandas()
    bodies = [orjson.loads(b) if isinstance(b, str) else {} for b in df.body_json]
    structured = np.array(["response_format" in b for b in bodies])
    tools = np.array(["tools" in b for b in bodies])
    assert not (structured & tools).any()
    assert 0.22 < structured.mean() < 0.38  # share 0.3 of 400
    assert 0.22 < tools.mean() < 0.34  # 0.4 of those without a schema: 0.28
    first = next(b for b in bodies if "response_format" in b)
    assert first["response_format"]["json_schema"]["schema"] == DEFAULT_SCHEMA
    call = next(b for b in bodies if "tools" in b)
    assert call["tools"] == DEFAULT_TOOLS and call["tool_choice"] == "auto"
    assert set(df["shape"][structured]) == {"structured_output"} and set(df["shape"][tools]) == {"tool_calls"}
    assert df.prompt[structured].str.endswith("follows the schema you were given.").all()


def test_a_declared_schema_replaces_the_bundled_one() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    rs = _set({"structured_output": {"schema": schema}}, n=3)
    body = orjson.loads(rs.table.column("body_json")[0].as_py())
    assert body["response_format"]["json_schema"]["schema"] == schema


def test_images_have_declared_sizes_and_decode_as_png() -> None:
    rs = _set({"images": {"count": 2, "sizes": ["64x48", "32x32"]}}, n=30)
    specs = [orjson.loads(x) for x in rs.table.column("images_json").to_pylist()]
    assert all(len(s) == 2 for s in specs)
    sizes = {(w, h) for s in specs for w, h, _ in s}
    assert sizes == {(64, 48), (32, 32)}
    width, height, seed = specs[0][0]
    image = Image.open(io.BytesIO(png_bytes(width, height, seed)))
    image.load()
    assert image.size == (width, height) and image.mode == "RGB"
    assert png_bytes(width, height, seed) == png_bytes(width, height, seed)
    assert png_bytes(width, height, seed) != png_bytes(width, height, seed + 1)


@pytest.mark.slow
def test_corpus_text_is_natural_and_long_contexts_reach_their_length(gguf_path: Path) -> None:
    tok = load_tokenizer(f"gguf:{gguf_path}")
    spec = WorkloadSpec.model_validate({"text": "corpus", "input_tokens": {"dist": "fixed", "value": 6000},
                                        "output_tokens": {"dist": "fixed", "value": 16}})
    rs = materialize(spec, 3, tok, 0)
    df = rs.table.to_pandas()
    assert (df.input_tokens_client == 6000).all()  # exact under Gemma's tokenizer
    corpus_sentences = {s.strip() for s in corpus_text().replace("\n", " ").split(". ") if len(s) > 40}
    for prompt in df.prompt:
        sentences = [s.strip() for s in prompt.replace("\n", " ").split(". ")[1:-1] if len(s) > 40]
        assert sum(s in corpus_sentences for s in sentences) >= 0.9 * len(sentences)  # whole corpus sentences
    assert df.prompt.nunique() == 3  # seeded paragraph orders differ


def test_a_mix_follows_its_weights_and_keeps_sessions_whole() -> None:
    rs = _set({"mix": [
        {"name": "chat", "weight": 3, "workload": {"input_tokens": {"dist": "fixed", "value": 8}}},
        {"name": "conv", "weight": 1, "workload": {"sessions": {"turns": 3}}},
        {"name": "json", "weight": 1, "workload": {"preset": "structured-output"}},
    ]}, n=500)
    df = rs.table.to_pandas()
    entries = df.iloc[entry_rows(rs.table)]
    share = entries["shape"].value_counts(normalize=True)
    assert abs(share["chat"] - 0.6) < 0.07 and abs(share["conv"] - 0.2) < 0.06 and abs(share["json"] - 0.2) < 0.06
    conv = df[df["shape"] == "conv"]
    for _, turns in conv.groupby("session"):
        assert list(turns.turn) == [0, 1, 2] and turns.index[-1] - turns.index[0] == 2
    assert (df.request_index == np.arange(len(df))).all()
    assert df.body_json[df["shape"] == "json"].notna().all() and df.body_json[df["shape"] == "chat"].isna().all()


def test_every_shape_is_byte_identical_for_the_same_inputs(tmp_path: Path) -> None:
    data = {"mix": [{"name": n, "weight": 1, "workload": {"preset": n}} for n in
                    ("multi-turn", "structured-output", "tool-calls", "images", "shared-prefix")]}
    a, b, c = _set(data, 30), _set(data, 30), _set(data, 30, seed=4)
    assert a.sha256 == b.sha256 != c.sha256
    pq.write_table(a.table, tmp_path / "a.parquet")
    pq.write_table(b.table, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()


def test_plain_workloads_keep_their_original_layout_and_hash() -> None:
    """The extended columns appear only when a new shape is used: older workloads keep their hashes."""
    rs = _set({"input_tokens": {"dist": "fixed", "value": 8}}, n=4)
    assert rs.table.column_names == ["request_index", "prompt", "input_tokens_target", "input_tokens_client",
                                     "output_tokens_target"]


def test_every_bundled_preset_validates_and_materializes() -> None:
    names = preset_names()
    assert {"chat", "shared-prefix", "multi-turn", "long-context", "structured-output", "tool-calls", "images",
            "mixed", "own-traffic"} <= set(names)
    for name in names:
        spec = WorkloadSpec.model_validate({"preset": name, "tokenizer": "none"})
        if name == "long-context":
            spec = spec.model_copy(update={"input_tokens": spec.input_tokens.model_copy(
                update={"low": 500, "high": 600})})  # the shape, not its 30K-token cost
        rs = materialize(spec, 6, NONE, 0)
        assert len(rs) >= 6, name


def test_preset_fields_are_replaced_by_the_ones_given_beside_it() -> None:
    spec = WorkloadSpec.model_validate({"preset": "multi-turn", "sessions": {"turns": 2}})
    assert spec.sessions is not None and spec.sessions.turns == 2
    assert spec.input_tokens.mean == 96  # from the preset


@pytest.mark.parametrize("data, message", [
    ({"preset": "nope"}, "not a bundled preset"),
    ({"source": {"path": "x.jsonl"}, "tools": {}}, "replays a log as it is"),
    ({"mix": [{"name": "a", "weight": 1, "workload": {}}], "sessions": {"turns": 2}}, "in its components"),
    ({"mix": [{"name": "a", "weight": 1, "workload": {"seed": 3}}]}, "one tokenizer and one seed"),
    ({"images": {"sizes": ["big"]}}, "WIDTHxHEIGHT"),
    ({"structured_output": {"share": 1.5}}, "less than or equal to 1"),
])
def test_bad_shapes_are_refused_with_the_reason(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        WorkloadSpec.model_validate(data)
