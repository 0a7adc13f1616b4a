"""`passport workload SPEC`: what a spec will offer, without sending anything.

Materializes the workload and the schedule exactly as `passport run` would (same seeds, same
tokenizer resolution, except that `tokenizer: auto` can only use a launched GGUF here, since no
endpoint is asked) and summarizes them: request and schedule counts, target and realized length
distributions as text histograms, the arrival pattern, and the hashes that the passport will
carry.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import orjson

from passport.model import RunSpec
from passport.run._plan import plan_workload, resolve_tokenizer
from workloads import RequestSet, entry_rows, load_tokenizer

__all__ = ["workload_summary"]

_BAR = 40


def _histogram(values: np.ndarray, label: str, bins: int = 10) -> list[str]:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return [f"{label}: no values"]
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        return [f"{label}: all {len(finite)} = {lo:g}"]
    if np.all(finite == np.round(finite)):  # integers: whole bins, each labelled by the values it holds
        width = max(1, math.ceil((hi - lo + 1) / bins))
        starts = np.arange(lo, hi + 1, width)
        counts, _ = np.histogram(finite, bins=np.append(starts, starts[-1] + width) - 0.5)
        labels = [f"{a:g}" if width == 1 else f"{a:g} – {a + width - 1:g}" for a in starts.tolist()]
    else:
        counts, edges = np.histogram(finite, bins=bins)
        labels = [f"{a:.4g} – {b:.4g}" for a, b in zip(edges[:-1].tolist(), edges[1:].tolist())]
    top = max(int(counts.max()), 1)
    lines = [f"{label}: n={len(finite)}, mean {finite.mean():.1f}, p50 {np.percentile(finite, 50):g}, "
             f"p99 {np.percentile(finite, 99):g}, min {lo:g}, max {hi:g}"]
    pad = max(map(len, labels))
    for count, text in zip(counts.tolist(), labels):
        lines.append(f"  {text:>{pad}} {'█' * max(0, round(count / top * _BAR)):<{_BAR}} {count}")
    return lines


def _shape_lines(request_set: RequestSet, n_entries: int) -> list[str]:
    """Shares of each shape, and the structure of sessions, constraints and images."""
    table = request_set.table
    if "shape" not in table.column_names:
        return []
    n = table.num_rows
    counts = Counter(str(x) for x in table.column("shape").to_pylist())
    lines = [f"entries: {n_entries} (a session counts once), requests: {n}",
             "shapes, as drawn: " + ", ".join(f"{k} {v} requests ({v / n:.0%})" for k, v in sorted(counts.items()))]
    sessions = [s for s in table.column("session").to_pylist() if s is not None]
    if sessions:
        turns = np.array(list(Counter(sessions).values()), dtype=float)
        lines += _histogram(turns, f"turns per session ({len(turns)} sessions)")
        think = np.array([t for t, k in zip(table.column("think_time_s").to_pylist(), table.column("turn").to_pylist())
                          if k], dtype=float)
        if len(think):
            lines.append(f"think time before a later turn: mean {think.mean():.2f} s, p50 {np.median(think):.2f} s, "
                         f"max {think.max():.2f} s")
    bodies = [orjson.loads(b) for b in table.column("body_json").to_pylist() if b]
    structured = sum("response_format" in b for b in bodies)
    tools = [b for b in bodies if "tools" in b]
    if structured:
        lines.append(f"structured output: {structured} requests ({structured / n:.0%}) carry a JSON Schema")
    if tools:
        names = sorted({t.get("function", {}).get("name") for b in tools for t in b["tools"]})
        choices = Counter(str(b.get("tool_choice")) for b in tools)
        lines.append(f"tools: {len(tools)} requests ({len(tools) / n:.0%}) carry {', '.join(names)}; "
                     f"tool_choice {dict(choices)}")
    images = [orjson.loads(x) for x in table.column("images_json").to_pylist() if x]
    if images:
        sizes = Counter(f"{w}x{h}" for per in images for w, h, _ in per)
        lines.append(f"images: {len(images)} requests ({len(images) / n:.0%}), {sum(sizes.values())} images: "
                     + ", ".join(f"{k} x{v}" for k, v in sorted(sizes.items())))
    return lines


def workload_summary(spec: RunSpec) -> list[str]:
    """The summary as text lines (see the module docstring)."""
    source, note = resolve_tokenizer(spec, {})
    tokenizer = load_tokenizer(source)
    schedule, request_set = plan_workload(spec, tokenizer)
    table = request_set.table
    lines = [
        f"workload: {len(request_set)} distinct requests, sha256 {request_set.sha256}",
        f"tokenizer: {request_set.tokenizer_source} ({'exact' if request_set.exact_lengths else 'approximate'} "
        f"lengths{'; ' + note if note else ''}), sha256 {request_set.tokenizer_sha256 or '—'}",
        f"schedule: {spec.load}, {schedule.table.num_rows} scheduled per repetition ({schedule.n_warmup} warm-up), "
        f"x {spec.load.repetitions} repetitions, sha256 {schedule.sha256}",
    ]
    lines += _shape_lines(request_set, len(entry_rows(table)))
    if spec.workload.mix:
        total = sum(c.weight for c in spec.workload.mix)
        lines.append("mix, as declared: " + ", ".join(
            f"{c.name} weight {c.weight:g} ({c.weight / total:.0%} of entries)" for c in spec.workload.mix))
    shared = spec.workload.shared_prefix
    if shared is not None:
        lines.append(f"shared prefixes: {shared.groups} groups of {shared.prefix_tokens} tokens, salt {shared.salt} "
                     "(applied when requests are built, outside the hash)")
    if spec.workload.source is not None:
        stamps = "timestamp_s" in table.column_names and table.column("timestamp_s").null_count == 0
        lines.append(f"imported: {len(request_set)} requests from {spec.workload.source.path} "
                     f"({spec.workload.source.format}), {'every one' if stamps else 'not all'} with a timestamp")
    offsets = np.asarray(schedule.table.column("intended_offset_ns").to_numpy(zero_copy_only=False), dtype=float)
    if spec.load.open_loop and len(offsets) > 1:
        gaps = np.diff(np.sort(offsets)) / 1e6
        lines += _histogram(gaps, "inter-arrival gaps (ms)")
    lines += _histogram(np.asarray(table.column("input_tokens_target").to_numpy(), dtype=float),
                        "input tokens, target")
    realized = table.column("input_tokens_client").to_numpy(zero_copy_only=False)
    if request_set.exact_lengths:
        realized = np.asarray(realized, dtype=float)
        target = np.asarray(table.column("input_tokens_target").to_numpy(), dtype=float)
        same = int((realized == target).sum())
        if same < len(target):
            lines += _histogram(realized, "input tokens, realized under the tokenizer")
        lines.append(f"realized = target for {same} of {len(target)} prompts")
    lines += _histogram(np.asarray(table.column("output_tokens_target").to_numpy(), dtype=float),
                        "output tokens, target (max_tokens)")
    return lines
