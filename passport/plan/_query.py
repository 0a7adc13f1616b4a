"""`passport capacity` as a library call: a `CapacityQuery` (what the user gives) in, a
`CapacityPlan` (every figure and the lines that explain them) out. The CLI only parses
arguments into the query and prints the plan."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from passport._errors import SpecError
from passport.plan._capacity import (
    Architecture,
    Budget,
    CapacityReport,
    KiB,
    MiB,
    architecture_from_config,
    compute,
    implied_state_per_sequence,
    load_config,
)
from passport.plan._cost import MonthlyCost, monthly_cost, replicas_needed

__all__ = ["CapacityQuery", "CapacityPlan", "plan_capacity"]


@dataclass(frozen=True)
class CapacityQuery:
    """What fits, asked: the model (a config folder or a parameter count), the memory budget,
    the context per sequence, optionally a published figure to explain and a month to price."""

    context: int
    config: Path | None = None
    params: float | None = None
    weights: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_gib: float | None = None
    utilization: float = 0.9
    reserve_gib: float = 0.0
    activations_gib: float = 0.0
    kv_pool_gib: float | None = None
    kv_kib_per_token: float | None = None
    state_mib_per_sequence: float | None = None
    published_sequences: int | None = None
    published_context: int | None = None
    live_sequences: int | None = None
    monthly_input_mtok: float | None = None
    monthly_output_mtok: float | None = None
    input_usd_per_million: float | None = None
    output_usd_per_million: float | None = None
    gpu_hour_usd: float | None = None
    gpus: int = 1
    tokens_per_s_per_card: float | None = None


@dataclass(frozen=True)
class CapacityPlan:
    """The answer: the memory arithmetic, the published figure explained, the replicas the live
    sequences need and the month priced; `lines` says it all in order, `figures` as JSON."""

    report: CapacityReport
    month: MonthlyCost | None
    lines: list[str]

    @property
    def figures(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self.report).items() if k != "lines"}
        if self.month is not None:
            out["month"] = {k: v for k, v in asdict(self.month).items() if k != "lines"}
        return out


def plan_capacity(q: CapacityQuery) -> CapacityPlan:
    """Answer `q` (see CapacityQuery); a SpecError names what is missing or inconsistent."""
    try:
        arch = architecture_from_config(load_config(q.config), q.params) if q.config else None
        if arch is None and q.params:
            arch = Architecture(n_params=q.params, full_attention_layers=0)
        kv = q.kv_kib_per_token * KiB if q.kv_kib_per_token else None
        if kv is None and (arch is None or not arch.full_attention_layers):
            raise SpecError("give --config (a model's config.json) or --kv-kib-per-token")
        budget = Budget.in_gib(q.weights, q.kv_dtype, q.gpu_memory_gib, q.utilization, q.reserve_gib,
                               q.activations_gib, q.kv_pool_gib)
        state = q.state_mib_per_sequence * MiB if q.state_mib_per_sequence is not None else None
        implied_lines: list[str] = []
        source = "given"
        if q.published_sequences:
            implied, implied_lines = _published(q, arch, budget, kv, state)
            if state is None:
                state, source = max(implied, 0.0), "implied by the published figure"
        report = compute(arch, budget, q.context, kv, state, source)
        month = _month(q, report.sequences_with_state)
    except (ValueError, OSError, KeyError) as exc:
        raise SpecError(f"capacity: {exc}") from None
    lines = report.lines + implied_lines + [
        f"=> {report.pool_tokens:,} tokens; {report.sequences_naive} sequences of {q.context:,} tokens by naive "
        f"division, {report.sequences_with_state} charging {report.state_bytes_per_sequence / MiB:.1f} MiB of fixed "
        "state per sequence"]
    if q.live_sequences is not None:
        replicas = replicas_needed(q.live_sequences, report.sequences_with_state)
        lines.append(f"=> {q.live_sequences} live sequences needed, {report.sequences_with_state} fit: "
                     + ("one replica suffices" if replicas == 1 else f"{replicas} replicas needed"))
    return CapacityPlan(report, month, lines + (month.lines if month is not None else []))


def _published(q: CapacityQuery, arch: Architecture | None, budget: Budget, kv: float | None,
               state: float | None) -> tuple[float, list[str]]:
    """The fixed state per sequence a published "N sequences of C tokens fit" implies, and the
    lines that show the subtraction."""
    assert q.published_sequences
    context = q.published_context or q.context
    base = compute(arch, budget, context, kv, 0.0 if state is None else state)
    implied = implied_state_per_sequence(base.pool_bytes, base.kv_bytes_per_token, q.published_sequences, context)
    return implied, [
        f"published: {q.published_sequences} live sequences of {context:,} tokens fit; naive "
        f"division gives {math.floor(base.pool_bytes / (context * base.kv_bytes_per_token))}",
        f"implied fixed state per sequence: {base.pool_bytes / MiB:,.0f} MiB / {q.published_sequences} - "
        f"{context:,} x {base.kv_bytes_per_token / KiB:.2f} KiB = {implied / MiB:.1f} MiB",
    ]


def _month(q: CapacityQuery, sequences_per_card: int) -> MonthlyCost | None:
    """The month priced, when a monthly volume is given (ValueError: prices missing)."""
    if q.monthly_input_mtok is None and q.monthly_output_mtok is None:
        return None
    if q.gpu_hour_usd is None and q.input_usd_per_million is None:
        raise ValueError("pricing a month needs --input-usd-per-million/--output-usd-per-million (managed) "
                         "and/or --gpu-hour-usd (owned)")
    if (q.input_usd_per_million is None) != (q.output_usd_per_million is None):
        raise ValueError("give both --input-usd-per-million and --output-usd-per-million")
    return monthly_cost(q.monthly_input_mtok or 0.0, q.monthly_output_mtok or 0.0, q.input_usd_per_million,
                        q.output_usd_per_million, q.gpu_hour_usd, q.gpus, q.live_sequences, sequences_per_card,
                        q.tokens_per_s_per_card)
