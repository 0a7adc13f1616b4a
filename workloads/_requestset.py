"""The materialized request set: an Arrow table plus its sha256.

Materialization is a pure function of (spec, seed, tokenizer, n): the same inputs give the same
table and hash. Columns (the public `schedule.parquet` workload fields):

| column | type | meaning |
|---|---|---|
| request_index | int64 | position in the set, 0-based |
| prompt | string | the user message (chat) or prompt (completions) |
| input_tokens_target | int64 | drawn from `workload.input_tokens` |
| input_tokens_client | int64 | realized length under the tokenizer (null with `none`) |
| output_tokens_target | int64 | drawn from `workload.output_tokens`; sent as max_tokens |
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa

from workloads._spec import WorkloadSpec
from workloads._synthetic import synthesize_prompt
from workloads._tokenizer import LoadedTokenizer

__all__ = ["RequestSet", "materialize", "table_sha256", "REQUEST_SET_SCHEMA"]

REQUEST_SET_SCHEMA = pa.schema(
    [
        ("request_index", pa.int64()),
        ("prompt", pa.string()),
        ("input_tokens_target", pa.int64()),
        ("input_tokens_client", pa.int64()),
        ("output_tokens_target", pa.int64()),
    ]
)


@dataclass(frozen=True)
class RequestSet:
    """The requests to offer, in order, with the hash that identifies them."""

    table: pa.Table
    sha256: str
    seed: int
    tokenizer_source: str
    tokenizer_sha256: str | None
    exact_lengths: bool

    def __len__(self) -> int:
        return int(self.table.num_rows)


def table_sha256(table: pa.Table) -> str:
    """sha256 of a table's column names and values, row by row, independent of file encoding."""
    digest = hashlib.sha256(orjson.dumps(table.column_names))
    columns = [table.column(name).to_pylist() for name in table.column_names]
    for row in zip(*columns):
        digest.update(orjson.dumps(row))
        digest.update(b"\n")
    return digest.hexdigest()


def materialize(spec: WorkloadSpec, n: int, tokenizer: LoadedTokenizer, seed: int) -> RequestSet:
    """Draw `n` synthetic requests from `spec` with `seed` (spec.seed, when set, wins)."""
    effective_seed = spec.seed if spec.seed is not None else seed
    # Independent streams for lengths and text, so changing one distribution leaves the other be.
    lengths_rng, text_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(effective_seed).spawn(2))
    inputs = spec.input_tokens.sample(lengths_rng, n)
    outputs = spec.output_tokens.sample(lengths_rng, n)
    prompts: list[str] = []
    realized: list[int | None] = []
    for target in inputs.tolist():
        text, count = synthesize_prompt(tokenizer.tokenizer, text_rng, int(target))
        prompts.append(text)
        realized.append(count if tokenizer.exact else None)
    table = pa.table(
        {
            "request_index": pa.array(np.arange(n, dtype=np.int64)),
            "prompt": pa.array(prompts, pa.string()),
            "input_tokens_target": pa.array(inputs),
            "input_tokens_client": pa.array(realized, pa.int64()),
            "output_tokens_target": pa.array(outputs),
        },
        schema=REQUEST_SET_SCHEMA,
    )
    return RequestSet(
        table=table,
        sha256=table_sha256(table),
        seed=effective_seed,
        tokenizer_source=tokenizer.source,
        tokenizer_sha256=tokenizer.sha256,
        exact_lengths=tokenizer.exact,
    )
