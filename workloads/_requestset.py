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

Every other shape (sessions, corpus text, structured output, tools, images, mixes) uses the
EXTENDED_SCHEMA, the union of the above plus:

| column | type | meaning |
|---|---|---|
| shape | string | the mix component's name, or the request's shape (see `_shape_of`) |
| images_json | string | `[[width, height, seed], ...]`: the images to generate (see `_images.py`) |
| session | int64 | multi-turn: the session (an entry of the schedule) this turn belongs to |
| turn | int64 | multi-turn: 0-based turn; rows of a session are consecutive |
| think_time_s | float64 | multi-turn: pause after the previous answer before this turn (0 for turn 0) |

In the extended table `prompt` is the new user text of the row (a turn's message, without the
history); `body_json` holds the fields sent besides it (`response_format`, `tools`,
`tool_choice`, or an imported request's messages). An *entry* is what the schedule offers: a
single request, or a session's first turn (the rest follow its answers).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from workloads._errors import WorkloadError
from workloads._formats import DEFAULT_SCHEMA, DEFAULT_TOOLS, STRUCTURED_INSTRUCTION, TOOLS_INSTRUCTION
from workloads._import import read_records
from workloads._spec import WorkloadSpec
from workloads._synthetic import synthesize_prompt
from workloads._tokenizer import LoadedTokenizer

__all__ = ["RequestSet", "materialize", "table_sha256", "REQUEST_SET_SCHEMA", "IMPORTED_SCHEMA",
           "SHARED_PREFIX_SCHEMA", "EXTENDED_SCHEMA", "entry_rows"]

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
EXTENDED_SCHEMA = pa.schema(list(REQUEST_SET_SCHEMA) + [
    ("shape", pa.string()), ("prefix_group", pa.int64()), ("body_json", pa.string()), ("images_json", pa.string()),
    ("session", pa.int64()), ("turn", pa.int64()), ("think_time_s", pa.float64()), ("timestamp_s", pa.float64()),
    ("session_id", pa.string())])
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


def entry_rows(table: pa.Table) -> np.ndarray:
    """Row indexes of the entries (single requests and first turns), in order."""
    if "turn" not in table.column_names:
        return np.arange(table.num_rows, dtype=np.int64)
    turn = table.column("turn").to_pylist()
    return np.array([i for i, t in enumerate(turn) if not t], dtype=np.int64)


def _shape_of(spec: WorkloadSpec, structured: bool, tools: bool, images: bool) -> str:
    """The most specific shape of one request of a single-shape workload."""
    if tools:
        return "tool_calls"
    if structured:
        return "structured_output"
    if images:
        return "images"
    if spec.sessions is not None:
        return "multi_turn"
    if spec.shared_prefix is not None:
        return "shared_prefix"
    if spec.source is not None:
        return "imported"
    return "long_context" if spec.text == "corpus" else "synthetic"


def _to_extended(table: pa.Table, shape: str) -> pa.Table:
    """A plain, shared-prefix or imported table with the extended columns (missing ones null)."""
    columns = {}
    for field in EXTENDED_SCHEMA:
        if field.name in table.column_names:
            columns[field.name] = table.column(field.name)
        elif field.name == "shape":
            columns[field.name] = pa.array([shape] * table.num_rows, pa.string())
        else:
            columns[field.name] = pa.nulls(table.num_rows, field.type)
    return pa.table(columns, schema=EXTENDED_SCHEMA)


def _prefix_groups(spec: WorkloadSpec, tokenizer: LoadedTokenizer, rng: np.random.Generator,
                   n: int) -> tuple[list[str], np.ndarray | None]:
    """The shared prefixes of `spec` (none without `shared_prefix`) and the group of each of `n`
    entries, drawn in this order from `rng`."""
    shared = spec.shared_prefix
    if shared is None:
        return [], None
    prefixes = [synthesize_prompt(tokenizer.tokenizer, rng, shared.prefix_tokens, spec.text)[0]
                for _ in range(shared.groups)]
    return prefixes, rng.integers(0, shared.groups, size=n)


def _plain(spec: WorkloadSpec, n: int, tokenizer: LoadedTokenizer, seed: int) -> pa.Table:
    """Synthetic single requests, optionally behind shared prefixes (the original layout)."""
    # Independent streams for lengths and text, so changing one distribution leaves the other be.
    lengths_rng, text_rng, prefix_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    inputs = spec.input_tokens.sample(lengths_rng, n)
    outputs = spec.output_tokens.sample(lengths_rng, n)
    shared = spec.shared_prefix
    prefixes, drawn = _prefix_groups(spec, tokenizer, prefix_rng, n)
    groups = drawn if drawn is not None else np.zeros(n, dtype=np.int64)
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
    return pa.table(columns, schema=SHARED_PREFIX_SCHEMA if shared else REQUEST_SET_SCHEMA)


def _pooled(spec: WorkloadSpec, n: int, tokenizer: LoadedTokenizer, seed: int, shape: str | None) -> pa.Table:
    """`n` requests that each carry several texts or a clip, in the extended layout, their
    fields in `body_json`: embeddings' `input` (a batch of `inputs_per_request` texts of
    `input_tokens` each), rerank's and score's `query` (of `input_tokens`) and `documents`, or
    an audio request's `audio` (`{"duration_ms", "seed"}` of a generated clip, or `{"file"}`).
    `prompt` is the texts joined by blank lines (a clip's description for audio), and the
    token targets and counts are their sums."""
    lengths_rng, text_rng, count_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))
    outputs = spec.output_tokens.sample(lengths_rng, n)
    cols: dict[str, list[Any]] = {name: [] for name in EXTENDED_SCHEMA.names}
    audio, documents = spec.audio, spec.documents
    if audio is not None:
        durations = audio.duration_dist().sample(lengths_rng, n)
        seeds = count_rng.integers(0, 2**31 - 1, size=n)
    for row in range(n):
        if audio is not None:
            if audio.files:
                path = audio.files[row % len(audio.files)]
                body: dict[str, Any] = {"audio": {"file": path}}
                prompt = f"audio file {path}"
            else:
                ms = max(100, int(round(float(durations[row]) * 1000)))
                body = {"audio": {"duration_ms": ms, "seed": int(seeds[row])}}
                prompt = f"audio clip {ms} ms seed {int(seeds[row])}"
            target = count = 0
        else:
            if documents is not None:
                query_target = int(spec.input_tokens.sample(lengths_rng, 1)[0])
                k = int(documents.count_dist().sample(count_rng, 1)[0])
                targets = [query_target, *documents.tokens.sample(lengths_rng, k).tolist()]
            else:
                k = int(spec.inputs_dist().sample(count_rng, 1)[0])
                targets = spec.input_tokens.sample(lengths_rng, k).tolist()
            drawn = [synthesize_prompt(tokenizer.tokenizer, text_rng, int(t), spec.text) for t in targets]
            texts = [text for text, _ in drawn]
            body = ({"query": texts[0], "documents": texts[1:]} if documents is not None else {"input": texts})
            prompt = "\n\n".join(texts)
            target, count = int(sum(targets)), int(sum(c for _, c in drawn))
        cols["request_index"].append(row)
        cols["prompt"].append(prompt)
        cols["input_tokens_target"].append(target)
        cols["input_tokens_client"].append(count if tokenizer.exact and audio is None else None)
        cols["output_tokens_target"].append(int(outputs[row]))
        cols["shape"].append(shape or ("audio" if audio else "documents" if documents else "inputs"))
        cols["body_json"].append(orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode())
        for name in ("prefix_group", "images_json", "session", "turn", "think_time_s", "timestamp_s", "session_id"):
            cols[name].append(None)
    return pa.table(cols, schema=EXTENDED_SCHEMA)


def _extended(spec: WorkloadSpec, n: int, tokenizer: LoadedTokenizer, seed: int, shape: str | None) -> pa.Table:
    """`n` entries of a single-shape workload in the extended layout (sessions expand to turns).

    Each aspect draws from its own seeded stream, so changing one (say, the tools share) leaves
    the prompts and lengths of the others as they were."""
    if spec.pooled:
        return _pooled(spec, n, tokenizer, seed, shape)
    if spec.source is not None or (spec.shared_prefix is not None and not spec.extended):
        base = _imported(spec, n, tokenizer, seed) if spec.source is not None else _plain(spec, n, tokenizer, seed)
        return _to_extended(base, shape or _shape_of(spec, False, False, False))
    lengths_rng, text_rng, prefix_rng, share_rng, session_rng, image_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6))
    enc = tokenizer.tokenizer.encode
    turns = spec.sessions.turns_dist().sample(session_rng, n) if spec.sessions else np.ones(n, dtype=np.int64)
    n_rows = int(turns.sum())
    session = np.repeat(np.arange(n, dtype=np.int64), turns)
    turn = np.concatenate([np.arange(k, dtype=np.int64) for k in turns.tolist()]) if n else np.zeros(0, np.int64)
    think = spec.sessions.think_dist().sample(session_rng, n_rows) if spec.sessions else np.zeros(n_rows)
    think[turn == 0] = 0.0
    inputs = spec.input_tokens.sample(lengths_rng, n_rows)
    outputs = spec.output_tokens.sample(lengths_rng, n_rows)
    prefixes, groups = _prefix_groups(spec, tokenizer, prefix_rng, n)
    prefix_tokens = spec.shared_prefix.prefix_tokens if spec.shared_prefix else 0
    so, tl, im = spec.structured_output, spec.tools, spec.images
    dims = im.dims() if im else []
    draws = share_rng.random((n_rows, 3))
    structured = draws[:, 0] < so.share if so else np.zeros(n_rows, bool)
    with_tools = (draws[:, 1] < tl.share) & ~structured if tl else np.zeros(n_rows, bool)
    with_images = draws[:, 2] < im.share if im else np.zeros(n_rows, bool)
    schema = (so.json_schema or DEFAULT_SCHEMA) if so else None
    tools_body = {"tools": tl.tools or DEFAULT_TOOLS, "tool_choice": tl.tool_choice} if tl else None
    structured_body = ({"response_format": {"type": "json_schema", "json_schema": {
        "name": "passport_workload", "schema": schema, "strict": True}}} if so else None)
    instruction_tokens = {text: len(enc(text)) + 1 for text in (STRUCTURED_INSTRUCTION, TOOLS_INSTRUCTION)}
    cols: dict[str, list[Any]] = {name: [] for name in EXTENDED_SCHEMA.names}
    for row in range(n_rows):
        target = int(inputs[row])
        instruction = (STRUCTURED_INSTRUCTION if structured[row] else TOOLS_INSTRUCTION if with_tools[row] else None)
        body_target = max(1, target - instruction_tokens[instruction]) if instruction else target
        text, count = synthesize_prompt(tokenizer.tokenizer, text_rng, body_target, spec.text)
        if instruction:
            text = f"{text}\n{instruction}"
        group = None
        if groups is not None and turn[row] == 0:
            group = int(groups[session[row]])
            text = f"{prefixes[group]}\n\n{text}"
            target += prefix_tokens
        if instruction or group is not None:
            count = len(enc(text))
        body = structured_body if structured[row] else tools_body if with_tools[row] else None
        images = None
        if with_images[row] and im is not None:
            picks = image_rng.integers(0, len(dims), size=im.count)
            seeds = image_rng.integers(0, 2**31 - 1, size=im.count)
            images = orjson.dumps([[dims[p][0], dims[p][1], int(s)]
                                   for p, s in zip(picks.tolist(), seeds.tolist())]).decode()
        cols["request_index"].append(row)
        cols["prompt"].append(text)
        cols["input_tokens_target"].append(target)
        cols["input_tokens_client"].append(count if tokenizer.exact else None)
        cols["output_tokens_target"].append(int(outputs[row]))
        cols["shape"].append(shape or _shape_of(spec, bool(structured[row]), bool(with_tools[row]), images is not None))
        cols["prefix_group"].append(group)
        cols["body_json"].append(orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode() if body else None)
        cols["images_json"].append(images)
        cols["session"].append(int(session[row]) if spec.sessions else None)
        cols["turn"].append(int(turn[row]) if spec.sessions else None)
        cols["think_time_s"].append(float(think[row]) if spec.sessions else None)
        cols["timestamp_s"].append(None)
        cols["session_id"].append(None)
    return pa.table(cols, schema=EXTENDED_SCHEMA)


def _mixed(spec: WorkloadSpec, n: int, tokenizer: LoadedTokenizer, seed: int) -> pa.Table:
    """`n` entries drawn from the mix by weight (seeded), each component materialized with its
    own seed, interleaved in draw order; sessions stay contiguous and are renumbered. An
    imported component with fewer records than its draws repeats them in order."""
    assert spec.mix is not None
    weights = np.array([c.weight for c in spec.mix], dtype=np.float64)
    picks = np.random.default_rng(np.random.SeedSequence([seed, 1 << 20])).choice(
        len(spec.mix), size=n, p=weights / weights.sum())
    parts: list[pa.Table] = []
    starts: list[np.ndarray] = []
    for index, component in enumerate(spec.mix):
        n_c = int((picks == index).sum())
        if not n_c:
            parts.append(EXTENDED_SCHEMA.empty_table())
            starts.append(np.zeros(0, np.int64))
            continue
        component_seed = int(np.random.SeedSequence([seed, index]).generate_state(1)[0])
        table = _extended(component.workload, n_c, tokenizer, component_seed, component.name)
        parts.append(table)
        starts.append(entry_rows(table))
    taken: list[pa.Table] = []
    cursor = [0] * len(spec.mix)
    for entry, index in enumerate(picks.tolist()):
        rows = starts[index]
        k = cursor[index] % len(rows)  # a component's log shorter than its share is cycled in order
        cursor[index] += 1
        end = int(rows[k + 1]) if k + 1 < len(rows) else parts[index].num_rows
        piece = parts[index].slice(int(rows[k]), end - int(rows[k]))
        if piece.column("session").null_count < piece.num_rows:
            piece = piece.set_column(piece.schema.get_field_index("session"), "session",
                                     pa.array([entry] * piece.num_rows, pa.int64()))
        taken.append(piece)
    table = pa.concat_tables(taken) if taken else EXTENDED_SCHEMA.empty_table()
    return table.set_column(0, "request_index", pa.array(np.arange(table.num_rows, dtype=np.int64)))


def materialize(spec: WorkloadSpec, n: int | None, tokenizer: LoadedTokenizer, seed: int) -> RequestSet:
    """Draw `n` synthetic entries from `spec` with `seed` (spec.seed, when set, wins), or take
    the first `n` records of an imported log (`n` None: every record, for trace replay)."""
    effective_seed = spec.seed if spec.seed is not None else seed
    if spec.source is not None:  # a log replays as it is: no other shape goes with it (see WorkloadSpec)
        table = _imported(spec, n, tokenizer, effective_seed)
    else:
        assert n is not None, "synthetic workloads need a size"
        if spec.mix is not None:
            table = _mixed(spec, n, tokenizer, effective_seed)
        elif spec.extended:
            table = _extended(spec, n, tokenizer, effective_seed, None)
        else:
            table = _plain(spec, n, tokenizer, effective_seed)
    return RequestSet(table=table, sha256=table_sha256(table), seed=effective_seed,
                      tokenizer_source=tokenizer.source, tokenizer_sha256=tokenizer.sha256,
                      exact_lengths=tokenizer.exact)
