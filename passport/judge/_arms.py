"""The records a campaign is judged from: one row per repetition of an arm, as its passport (or
its failure) says, and one summary per arm over its repetitions. Plain data: `_campaign` builds
them, `_advice` words them, and both import them from here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ArmRow", "ArmSummary", "Fit"]


@dataclass(frozen=True)
class Fit:
    """The capacity arithmetic of one arm: live sequences that fit against those needed."""

    fits: bool
    sequences_fit: int
    sequences_needed: int
    lines: list[str]


@dataclass
class ArmRow:
    """One repetition of one arm, as its passport (or its failure) says; what its status means is
    in `passport.judge._campaign`'s docstring."""

    name: str
    varies: dict[str, str]
    status: str
    reason: str | None = None
    run: str | None = None  # its run (or sweep level) folder, relative to the campaign folder
    passport_sha256: str | None = None
    verdict: str | None = None
    canaries: str | None = None
    fit: dict[str, Any] | None = None
    kv_tokens: dict[str, int | None] = field(default_factory=lambda: {"configured": None, "realized": None})
    context_per_sequence: int | None = None
    throughput: dict[str, float | None] = field(default_factory=dict)
    goodput: dict[str, float | None] = field(default_factory=dict)
    ttft: dict[str, float | None] = field(default_factory=dict)
    e2e: dict[str, float | None] = field(default_factory=dict)
    slo_met: bool | None = None
    peak_memory_bytes: int | None = None
    cost: dict[str, Any] | None = None
    discarded: list[str] = field(default_factory=list)
    invariants: dict[str, Any] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)
    objective: float | None = None
    round: int = 1
    accuracy: dict[str, dict[str, float | None]] | None = None  # by set: alone, under_load, drop


@dataclass
class ArmSummary:
    """One arm over its repetitions: its status, its figures' means, its objective's interval, its
    rank group and the arms it is tied with; the repetitions' own rows beside."""

    name: str
    varies: dict[str, str]
    status: str
    reason: str | None
    fit: dict[str, Any] | None
    kv_tokens: dict[str, int | None]
    context_per_sequence: int | None
    repetitions_run: int
    run: str | None  # the first repetition's folder (the report links every one)
    verdict: str | None
    canaries: str | None
    throughput: dict[str, float | None]
    goodput: dict[str, float | None]
    ttft: dict[str, float | None]
    e2e: dict[str, float | None]
    slo_met: bool | None  # in every repetition
    peak_memory_bytes: int | None  # the largest of any repetition
    cost: dict[str, Any] | None
    discarded: list[str]
    broken: list[str]
    objective: float | None  # the mean over its repetitions
    interval: dict[str, float | int | None]  # low, high (95 % t), sd, n
    rank: int | None = None
    tied_with: list[str] = field(default_factory=list)
    repetitions: list[dict[str, Any]] = field(default_factory=list)
    accuracy: dict[str, dict[str, float | None]] | None = None  # by set, the means over its repetitions
