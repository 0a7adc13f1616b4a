"""The workload part of a run spec: what is sent, independent of how and when."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from workloads._import import ImportSpec
from workloads._lengths import LengthDist

__all__ = ["WorkloadSpec"]


class WorkloadSpec(BaseModel):
    """Synthetic requests: prompt lengths, output budgets, tokenizer and seed.

    `requests` is the size of the materialized pool; None lets the load decide (open loop: one
    per scheduled arrival; closed loop: enough for the run, cycled in order).
    """

    model_config = ConfigDict(extra="forbid")

    tokenizer: str = Field(
        "auto",
        description="auto | a local tokenizer folder | gguf:<file> | none (approximate lengths).",
    )
    input_tokens: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="fixed", value=256),
        description="Prompt length in tokens under the tokenizer.",
    )
    output_tokens: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="fixed", value=128),
        description="Output budget in tokens, sent as max_tokens (and enforced where supported).",
    )
    requests: int | None = Field(None, ge=1, description="Pool size; None: derived from the load.")
    seed: int | None = Field(None, description="Workload seed; None: load.seed.")
    source: ImportSpec | None = Field(
        None, description="Your own traffic: a request log (openai JSONL or sharegpt) instead of synthetic prompts; "
                          "output_tokens then only fills budgets the log lacks.")
