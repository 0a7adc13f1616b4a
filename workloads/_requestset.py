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

A shared-prefix workload (`workload.shared_prefix`) has one more column, `prefix_group`, and its
targets include the prefix. An imported workload (`workload.source`, see `_import.py`) has three
more columns:
`body_json` (the messages / prompt / tools / tool_choice / response_format sent, as JSON),
`timestamp_s` (the log's time, for trace replay) and `session_id`; its `input_tokens_target`
is the realized length (a log has no target), counted over the text of its messages.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from workloads._errors import WorkloadError
from workloads._import import read_records
from workloads._spec import WorkloadSpec
from workloads._synthetic import synthesize_prompt
from workloads._tokenizer import LoadedTokenizer

__all__ = ["RequestSet", "materialize", "table_sha256", "REQUEST_SET_SCHEMA", "IMPORTED_SCHEMA",
           "SHARED_PREFIX_SCHEMA"]

REQUEST_SET_SCHEMA = pa.schema(
    [
        ("request_index", pa.int64()),
        ("prompt", pa.string()),
        ("input_tokens_target", pa.int64()),
        ("input_tokens_client", pa.int64()),
        ("output_tokens_target", pa.int64()),
    ]
)

SHARED_PREFIX_SCHEMA = pa.schema(list(REQUEST_SET_SCHEMA) + [("prefix_group", pa.int64())])
IMPORTED_SCHEMA = pa.schema(list(REQUEST_SET_SCHEMA) + [
    ("body_json", pa.string()), ("timestamp_s", pa.float64()), ("session_id", pa.string())])
_BATCH = 65536


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
    for batch in table.to_batches(max_chunksize=_BATCH):  # a batch at a time: memory stays flat
        columns = [column.to_pylist() for column in batch.columns]
        for row in zip(*columns):
            digest.update(orjson.dumps(row))
            digest.update(b"\n")
    return digest.hexdigest()


def _imported(spec: WorkloadSpec, n: int | None, tokenizer: LoadedTokenizer, seed: int) -> pa.Table:
    """The first `n` usable records of `spec.source` (all with None), in Arrow batches."""
    assert spec.source is not None
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    batches: list[pa.RecordBatch] = []
    cols: dict[str, list[Any]] = {name: [] for name in IMPORTED_SCHEMA.names}
    index = 0

    def flush() -> None:
        if cols["prompt"]:
            batches.append(pa.RecordBatch.from_pydict(cols, schema=IMPORTED_SCHEMA))
            for values in cols.values():
                values.clear()

    for record in read_records(spec.source, limit=n):
        count = len(tokenizer.tokenizer.encode(record.text))
        budget = record.max_tokens
        if budget is None and record.reply is not None:
            budget = max(1, len(tokenizer.tokenizer.encode(record.reply)))
        if budget is None:
            budget = int(spec.output_tokens.sample(rng, 1)[0])
        cols["request_index"].append(index)
        cols["prompt"].append(record.text)
        cols["input_tokens_target"].append(count)
        cols["input_tokens_client"].append(count if tokenizer.exact else None)
        cols["output_tokens_target"].append(budget)
        cols["body_json"].append(orjson.dumps(record.body).decode())
        cols["timestamp_s"].append(record.timestamp_s)
        cols["session_id"].append(record.session_id)
        index += 1
        if len(cols["prompt"]) >= _BATCH:
            flush()
    flush()
    if not batches:
        raise WorkloadError(f"workload.source {spec.source.path} holds no usable request")
    return pa.Table.from_batches(batches, schema=IMPORTED_SCHEMA)


def materialize(spec: WorkloadSpec, n: int | None, tokenizer: LoadedTokenizer, seed: int) -> RequestSet:
    """Draw `n` synthetic requests from `spec` with `seed` (spec.seed, when set, wins), or take
    the first `n` records of an imported log (`n` None: every record, for trace replay)."""
    effective_seed = spec.seed if spec.seed is not None else seed
    if spec.source is not None:
        table = _imported(spec, n, tokenizer, effective_seed)
        return RequestSet(table=table, sha256=table_sha256(table), seed=effective_seed,
                          tokenizer_source=tokenizer.source, tokenizer_sha256=tokenizer.sha256,
                          exact_lengths=tokenizer.exact)
    assert n is not None, "synthetic workloads need a size"
    # Independent streams for lengths and text, so changing one distribution leaves the other be.
    lengths_rng, text_rng, prefix_rng = (np.random.default_rng(s)
                                         for s in np.random.SeedSequence(effective_seed).spawn(3))
    inputs = spec.input_tokens.sample(lengths_rng, n)
    outputs = spec.output_tokens.sample(lengths_rng, n)
    shared = spec.shared_prefix
    prefixes = ([synthesize_prompt(tokenizer.tokenizer, prefix_rng, shared.prefix_tokens)[0]
                 for _ in range(shared.groups)] if shared else [])
    groups = prefix_rng.integers(0, shared.groups, size=n) if shared else np.zeros(n, dtype=np.int64)
    prompts: list[str] = []
    realized: list[int | None] = []
    targets: list[int] = []
    for target, group in zip(inputs.tolist(), groups.tolist()):
        text, count = synthesize_prompt(tokenizer.tokenizer, text_rng, int(target))
        if shared:
            text = f"{prefixes[group]}\n\n{text}"
            count = len(tokenizer.tokenizer.encode(text))
            target = int(target) + shared.prefix_tokens
        prompts.append(text)
        targets.append(int(target))
        realized.append(count if tokenizer.exact else None)
    columns = {
        "request_index": pa.array(np.arange(n, dtype=np.int64)),
        "prompt": pa.array(prompts, pa.string()),
        "input_tokens_target": pa.array(targets, pa.int64()),
        "input_tokens_client": pa.array(realized, pa.int64()),
        "output_tokens_target": pa.array(outputs),
    }
    if shared:
        columns["prefix_group"] = pa.array(groups.astype(np.int64))
    table = pa.table(columns, schema=SHARED_PREFIX_SCHEMA if shared else REQUEST_SET_SCHEMA)
    return RequestSet(
        table=table,
        sha256=table_sha256(table),
        seed=effective_seed,
        tokenizer_source=tokenizer.source,
        tokenizer_sha256=tokenizer.sha256,
        exact_lengths=tokenizer.exact,
    )
