"""`passport workload SPEC`: what a spec will offer, without sending anything.

Materializes the workload and the schedule exactly as `passport run` would (same seeds, same
tokenizer resolution, except that `tokenizer: auto` can only use a launched GGUF here, since no
endpoint is asked) and summarizes them: request and schedule counts, target and realized length
distributions as text histograms, the arrival pattern, and the hashes that the passport will
carry.
"""

from __future__ import annotations

import numpy as np

from passport._run import plan_workload, resolve_tokenizer
from passport._spec import RunSpec
from workloads import load_tokenizer

__all__ = ["workload_summary"]

_BAR = 40


def _histogram(values: np.ndarray, label: str, bins: int = 10) -> list[str]:
    finite = values[np.isfinite(values)]
    if not len(finite):
        return [f"{label}: no values"]
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        return [f"{label}: all {len(finite)} = {lo:g}"]
    if np.all(finite == np.round(finite)):  # integers: no bin narrower than one
        bins = max(1, min(bins, int(hi - lo) + 1))
    counts, edges = np.histogram(finite, bins=bins)
    top = max(int(counts.max()), 1)
    lines = [f"{label}: n={len(finite)}, mean {finite.mean():.1f}, p50 {np.percentile(finite, 50):g}, "
             f"p99 {np.percentile(finite, 99):g}, min {lo:g}, max {hi:g}"]
    for count, a, b in zip(counts.tolist(), edges[:-1].tolist(), edges[1:].tolist()):
        lines.append(f"  {a:>8.0f} – {b:<8.0f} {'█' * max(0, round(count / top * _BAR)):<{_BAR}} {count}")
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
