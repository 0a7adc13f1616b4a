"""Planning a run before anything is timed: the request fields every request carries, the
tokenizer, the request set and schedule (materialized and hashed), schedule.parquet, and
declared.json (the effective spec and realized capacity, frozen before the first timed request).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness import ANTHROPIC_SAMPLING, POOLING_KINDS, Schedule, build_schedule, engines, open_new, scrub_json
from passport.audit import DECLARED_FILE, write_declared
from passport.model import DeclaredInfo, RunSpec, SourcedValue
from workloads import LoadedTokenizer, RequestSet, entry_rows, is_tokenizer_folder, materialize

__all__ = ["request_params", "resolve_tokenizer", "salt_of", "plan_workload", "declare", "write_schedule",
           "shape_counts", "utc_now"]

# Decoding presets, as model cards publish them (Qwen3-2507 Instruct: 0.7 / 0.8 / 20; thinking
# models: 1.0 / 0.95 / 20 with a presence penalty against repetition in long reasoning). Fields
# set in `decoding` replace the preset's; `explicit` sends only what is declared.
_PRESETS: dict[str, dict[str, Any]] = {
    "instruct": {"temperature": 0.7, "top_p": 0.8, "top_k": 20},
    "thinking": {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "presence_penalty": 1.5},
    "explicit": {},
}
# Sampling fields open engines take and OpenAI-only APIs reject (engine profile `openai_params_only`).
_OPEN_ENGINE_ONLY = ("top_k",)


def request_params(spec: RunSpec, engine: str | None) -> tuple[dict[str, Any], bool]:
    """(body fields sent with every request, whether max_tokens is the output *target*).
    Pooling kinds (embeddings, rerank, score) sample nothing: only decoding.extra goes. Anthropic
    Messages takes only its own sampling fields. ignore_eos goes to chat and completions as the
    engine honours it (auto), and to the other kinds only when declared."""
    d = spec.decoding
    api = spec.endpoint.api
    if api in POOLING_KINDS:
        return dict(d.extra), False
    params = dict(_PRESETS[d.preset])
    found = engines.profile(engine)
    if found is not None and found.openai_params_only:
        params = {k: v for k, v in params.items() if k not in _OPEN_ENGINE_ONLY}
    for key in ("temperature", "top_p", "top_k", "presence_penalty", "seed"):
        value = getattr(d, key)
        if value is not None:
            params[key] = value
    honoured = found is not None and found.ignore_eos and api in ("chat", "completions")
    ignore_eos = honoured if d.ignore_eos == "auto" else bool(d.ignore_eos)
    if api == "anthropic_messages":
        params = {k: v for k, v in params.items() if k in ANTHROPIC_SAMPLING}
    if ignore_eos:
        params["ignore_eos"] = True
    params.update(d.extra)
    return params, ignore_eos


def utc_now(ts: float | None = None) -> str:
    return dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def resolve_tokenizer(spec: RunSpec, identity: dict[str, SourcedValue]) -> tuple[str, str | None]:
    """(tokenizer source, note) for `workload.tokenizer`, resolving `auto`."""
    declared = spec.workload.tokenizer
    if declared != "auto":
        return declared, None
    if spec.engine and spec.engine.model_path and spec.engine.model_path.endswith(".gguf"):
        return f"gguf:{os.path.expanduser(spec.engine.model_path)}", "auto: the launched model's GGUF"
    if spec.engine and spec.engine.model_path and is_tokenizer_folder(spec.engine.model_path):
        return os.path.expanduser(spec.engine.model_path), "auto: the launched model's folder"
    probed = identity.get("model.root")
    if probed and isinstance(probed.value, str) and probed.value.endswith(".gguf") and os.path.isfile(probed.value):
        return f"gguf:{probed.value}", "auto: the GGUF the server reports in /props"
    if probed and isinstance(probed.value, str) and is_tokenizer_folder(probed.value):
        return probed.value, f"auto: the model folder the server reports ({probed.via})"
    return "none", "auto: no local tokenizer found for this model; lengths are approximate"


def salt_of(spec: RunSpec, run_id: str) -> str:
    """The marker that starts every shared prefix (see workloads.SharedPrefixSpec), or ""."""
    shared = spec.workload.shared_prefix
    if shared is None or shared.salt == "none":
        return ""
    return f"[run {run_id}]" if shared.salt == "per_run" else shared.salt


def plan_workload(spec: RunSpec, tokenizer: LoadedTokenizer) -> tuple[Schedule, RequestSet]:
    """The schedule and the request set a run offers. Trace replay takes every record of the
    imported log and schedules them at its recorded times; other patterns size the set to the
    schedule's pool (a log with fewer records is cycled in order; the passport notes it). The
    schedule's `request_index` counts entries (requests, or sessions' first turns: see
    `workloads.entry_rows`)."""
    if spec.load.pattern == "trace":
        request_set = materialize(spec.workload, None, tokenizer, seed=spec.load.seed)
        names = request_set.table.column_names
        stamps = (np.asarray(request_set.table.column("timestamp_s").to_numpy(zero_copy_only=False), dtype=float)
                  if "timestamp_s" in names else None)
        return build_schedule(spec.load, None, timestamps_s=stamps), request_set
    schedule = build_schedule(spec.load, spec.workload.requests)
    request_set = materialize(spec.workload, schedule.pool_size, tokenizer, seed=spec.load.seed)
    n_entries = len(entry_rows(request_set.table))
    if n_entries < schedule.pool_size:  # an imported log shorter than the schedule: cycled in order
        schedule = build_schedule(spec.load, n_entries)
    return schedule, request_set


def context_needed(request_set: RequestSet) -> int | None:
    """The longest request's prompt (our tokenizer's count, else its target) plus its output
    budget, in tokens; a
    session's last turn carries every earlier message and answer (at their budgets), so its
    need is the session's whole sum."""
    table = request_set.table
    if not table.num_rows:
        return None
    counted = table.column("input_tokens_client").to_pylist()
    targets = table.column("input_tokens_target").to_pylist()
    prompt = [c if c is not None else t for c, t in zip(counted, targets)]  # no tokenizer: the target
    output = table.column("output_tokens_target").to_pylist()
    sessions = table.column("session").to_pylist() if "session" in table.column_names else [None] * len(prompt)
    need: dict[object, int] = {}
    for i, (p, o, s) in enumerate(zip(prompt, output, sessions)):
        key = ("session", s) if s is not None else i
        need[key] = need.get(key, 0) + int(p or 0) + int(o or 0)
    return max(need.values())


def declare(folder: Path, spec: RunSpec, identity: dict[str, SourcedValue], request_set: RequestSet) -> DeclaredInfo:
    """Freeze the effective spec, the realized per-sequence context and the workload's largest
    need into declared.json."""
    probed = identity.get("capacity.context_per_sequence")
    capacity = probed.value if probed is not None and isinstance(probed.value, int) else None
    source = f"{probed.source}: {probed.via}" if capacity is not None and probed is not None else None
    sha, written_utc = write_declared(folder, scrub_json(spec.model_dump(mode="json")), capacity, source,
                                      context_needed(request_set))
    return DeclaredInfo(file=DECLARED_FILE, sha256=sha, written_utc=written_utc,
                        context_tokens_per_sequence=capacity, capacity_source=source)


_SCHEDULE_EXTRAS = ("shape", "prefix_group", "session", "turn", "think_time_s", "images_json")


def write_schedule(folder: Path, schedule: Schedule, request_set: RequestSet, entries: np.ndarray,
                    full_text: bool) -> int:
    """schedule.parquet: every scheduled entry with its workload fields; a session's later turns
    follow its first, with the session's seq and phase and no intended time (they are sent when
    the previous answer is in). `request_index` is the row of the request set. Returns the
    number of requests it lists."""
    wl = request_set.table
    scheduled = schedule.table.column("request_index").to_numpy()
    first = entries[scheduled]
    lengths = (np.append(entries[1:], wl.num_rows) - entries)[scheduled]  # rows of each entry
    position = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # turn in entry
    rows = np.repeat(first, lengths) + position
    is_first = position == 0
    base = schedule.table.take(pa.array(np.repeat(np.arange(len(first)), lengths)))
    offsets = pc.if_else(pa.array(is_first), base.column("intended_offset_ns"), pa.scalar(None, pa.int64()))
    table = pa.table({
        "seq": base.column("seq"), "phase": base.column("phase"),
        "intended_offset_ns": offsets,
        "request_index": pa.array(rows, pa.int64()),
    })
    take = pa.array(rows, pa.int64())
    names = ["input_tokens_target", "input_tokens_client", "output_tokens_target"] + [
        n for n in _SCHEDULE_EXTRAS if n in wl.column_names]
    for name in names:
        table = table.append_column(name, wl.column(name).take(take))
    prompts = wl.column("prompt").take(take)
    table = table.append_column("prompt", prompts if full_text else pa.nulls(len(prompts), pa.string()))
    if "body_json" in wl.column_names and full_text:
        table = table.append_column("body_json", wl.column("body_json").take(take))
    with open_new(folder / "schedule.parquet") as file:
        pq.write_table(table, file, compression="zstd")
    return int(table.num_rows)


def shape_counts(request_set: RequestSet) -> dict[str, int] | None:
    """Requests of the set per shape (None for a plain workload without the column)."""
    if "shape" not in request_set.table.column_names:
        return None
    return dict(sorted(Counter(str(x) for x in request_set.table.column("shape").to_pylist()).items()))
