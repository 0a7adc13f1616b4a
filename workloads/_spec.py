"""The workload part of a run spec: what is sent, independent of how and when."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from workloads._import import ImportSpec
from workloads._lengths import LengthDist

__all__ = ["WorkloadSpec", "SharedPrefixSpec"]


class SharedPrefixSpec(BaseModel):
    """G groups, each with a shared prefix (a system prompt / document) of P tokens; every request
    is one group's prefix followed by its own suffix of `input_tokens` tokens.

    `salt`: `per_run` starts every prefix with a marker unique to the run (`[run <id>]`), so no
    earlier run's cached prefix can match and the cache state is this run's own; `none` keeps
    the prefixes identical across runs (a second run finds them cached); any other string is
    used as the marker. The salt is applied when requests are built, outside the workload hash,
    so salted runs stay comparable; the protocol records it.
    """

    model_config = ConfigDict(extra="forbid")

    groups: int = Field(ge=1, description="Number of distinct prefixes.")
    prefix_tokens: int = Field(ge=1, description="Tokens of each prefix (exact under the tokenizer).")
    salt: Literal["per_run", "none"] | str = Field("per_run", description="per_run | none | a fixed marker.")


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
    shared_prefix: SharedPrefixSpec | None = Field(
        None, description="Requests share one of G prefixes of P tokens; input_tokens is then the suffix.")
    source: ImportSpec | None = Field(
        None, description="Your own traffic: a request log (openai JSONL or sharegpt) instead of synthetic prompts; "
                          "output_tokens then only fills budgets the log lacks.")
