from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from workloads import LengthDist, WorkloadSpec, load_tokenizer, materialize

SPEC = WorkloadSpec(input_tokens=LengthDist(dist="lognormal", mean=200, sigma=0.6, min=4, max=1500),
                    output_tokens=LengthDist(dist="uniform", low=8, high=64))


def test_same_seed_gives_identical_set_and_hash_other_seed_differs() -> None:
    tok = load_tokenizer("none")
    a, b, c = materialize(SPEC, 20, tok, 1), materialize(SPEC, 20, tok, 1), materialize(SPEC, 20, tok, 2)
    assert a.sha256 == b.sha256 and a.table.equals(b.table)
    assert a.sha256 != c.sha256
    assert not a.exact_lengths and a.table.column("input_tokens_client").null_count == 20


def test_spec_seed_overrides_the_run_seed() -> None:
    tok = load_tokenizer("none")
    spec = SPEC.model_copy(update={"seed": 9})
    assert materialize(spec, 5, tok, 1).sha256 == materialize(spec, 5, tok, 2).sha256


@pytest.mark.slow
def test_input_lengths_are_exact_under_the_gemma_tokenizer(gguf_path: Path) -> None:
    tok = load_tokenizer(f"gguf:{gguf_path}")
    rs = materialize(SPEC, 60, tok, 3)
    target, realized = rs.table.column("input_tokens_target"), rs.table.column("input_tokens_client")
    assert pc.all(pc.equal(target, realized)).as_py()
    assert rs.tokenizer_sha256 is not None and rs.exact_lengths
    prompt = rs.table.column("prompt")[0].as_py()
    assert len(tok.tokenizer.encode(prompt)) == target[0].as_py()
