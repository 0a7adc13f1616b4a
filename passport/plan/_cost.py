"""A month of tokens priced two ways, before any measurement: on a managed endpoint (per-token
prices) and on cards owned or rented by the hour, kept on all month.

The managed bill is input tokens x the input price + output tokens x the output price. The owned
bill is cards x USD per card-hour x 730 hours (a year's 8,760 hours over twelve months), where the
cards are the most of: those the memory arithmetic needs (one replica of `gpus_per_replica`
cards holds `sequences_per_card` live sequences; `passport capacity` computes it) and, when a
measured throughput per replica is given, the replicas that serve the month's tokens at it. The break-even volume is the
monthly token count at which the two bills are equal, at this input:output mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["HOURS_PER_MONTH", "MonthlyCost", "monthly_cost", "replicas_needed"]

HOURS_PER_MONTH = 8760 / 12


def replicas_needed(live_sequences: int, sequences_per_replica: int) -> int:
    """Replicas that hold `live_sequences` at `sequences_per_replica` each (at least one)."""
    return max(1, math.ceil(live_sequences / max(sequences_per_replica, 1)))


@dataclass(frozen=True)
class MonthlyCost:
    managed_usd: float | None
    owned_usd: float | None
    cards: int | None
    break_even_million_tokens: float | None
    lines: list[str]


def monthly_cost(input_million: float, output_million: float, input_usd_per_million: float | None,
                 output_usd_per_million: float | None, gpu_hour_usd: float | None, gpus_per_replica: int = 1,
                 live_sequences: int | None = None, sequences_per_card: int | None = None,
                 tokens_per_s_per_card: float | None = None) -> MonthlyCost:
    """Price a month (see the module docstring); either side may be missing (its figures None)."""
    lines: list[str] = []
    total_million = input_million + output_million
    managed = None
    if input_usd_per_million is not None and output_usd_per_million is not None:
        managed = input_million * input_usd_per_million + output_million * output_usd_per_million
        lines.append(f"managed: {input_million:,.1f} M input x USD {input_usd_per_million:g} + {output_million:,.1f} M "
                     f"output x USD {output_usd_per_million:g} = USD {managed:,.2f} per month")
    owned = cards = None
    if gpu_hour_usd is not None:
        cards = gpus_per_replica
        reasons = [f"{gpus_per_replica} per replica"]
        if live_sequences is not None and sequences_per_card:
            replicas = replicas_needed(live_sequences, sequences_per_card)
            cards = max(cards, replicas * gpus_per_replica)
            reasons.append(f"{live_sequences} live sequences / {sequences_per_card} per replica = {replicas} "
                           f"replica(s)")
        if tokens_per_s_per_card:
            per_month = tokens_per_s_per_card * 3600 * HOURS_PER_MONTH / 1e6
            by_volume = max(1, math.ceil(total_million / per_month))
            cards = max(cards, by_volume * gpus_per_replica)
            reasons.append(f"{total_million:,.1f} M tokens / {per_month:,.1f} M per replica-month at "
                           f"{tokens_per_s_per_card:g} tok/s = {by_volume} replica(s)")
        owned = cards * gpu_hour_usd * HOURS_PER_MONTH
        lines.append(f"owned: {cards} card(s) ({'; '.join(reasons)}) x USD {gpu_hour_usd:g}/h x "
                     f"{HOURS_PER_MONTH:.0f} h = USD {owned:,.2f} per month")
    even = None
    if managed is not None and owned is not None and total_million > 0 and managed > 0:
        blended = managed / total_million
        even = owned / blended
        cheaper = "owned" if owned < managed else "managed"
        lines.append(f"break-even: {even:,.0f} M tokens per month at this mix (managed USD {blended:.4g} per million "
                     f"tokens); at {total_million:,.1f} M the {cheaper} option is cheaper")
    return MonthlyCost(managed, owned, cards, even, lines)
