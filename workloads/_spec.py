"""The workload part of a run spec: what is sent, independent of how and when.

One WorkloadSpec declares a traffic shape; several combine as a weighted `mix`. Shapes:
synthetic prompts (`text: words`), natural text from the bundled corpus (`text: corpus`, for
long contexts), your own traffic (`source`), shared prefixes (`shared_prefix`), multi-turn
sessions (`sessions`), and per-request decorations drawn with a share: structured output
(`structured_output`), tool calls (`tools`) and images (`images`). `preset: NAME` starts from
`workloads/presets/NAME.yaml`; the fields given beside it replace the preset's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from workloads._import import ImportSpec
from workloads._lengths import LengthDist
from workloads._tokenizer import in_cache
from workloads._yaml import load_yaml

__all__ = ["WorkloadSpec", "SharedPrefixSpec", "SessionSpec", "DurationDist", "StructuredOutputSpec",
           "ToolsSpec", "ImagesSpec", "MixComponent", "DocumentsSpec", "AudioSpec", "PRESETS_DIR", "preset_names",
           "preset_lines"]

PRESETS_DIR = Path(__file__).resolve().parent / "presets"


def preset_names() -> list[str]:
    """The bundled presets, by name (file stem)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def preset_lines() -> list[str]:
    """One line per bundled preset: its name and description."""
    lines = []
    for name in preset_names():
        data = load_yaml((PRESETS_DIR / f"{name}.yaml").read_bytes(), f"preset {name}") or {}
        lines.append(f"{name:<18} {data.get('description', '')}")
    return lines


def _with_preset(data: Any) -> Any:
    """A spec mapping with its `preset` expanded: the preset's fields, then the given ones."""
    if not isinstance(data, dict) or not data.get("preset"):
        return data
    name = str(data["preset"])
    path = PRESETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"workload.preset {name!r} is not a bundled preset; choose one of "
                         f"{', '.join(preset_names())}")
    base = yaml.safe_load(path.read_text()) or {}
    base.pop("description", None)
    return {**base, **data}


class SharedPrefixSpec(BaseModel):
    """G groups, each with a shared prefix (a system prompt / document) of P tokens; every request
    is one group's prefix followed by its own suffix of `input_tokens` tokens.

    `salt`: `per_run` starts every prefix with a marker unique to the run (`[run <id>]`), so no
    earlier run's cached prefix can match and the cache state is this run's own; `none` keeps
    the prefixes identical across runs (a second run finds them cached); any other string is
    used as the marker. The salt is applied when requests are built, outside the workload hash,
    so salted runs stay comparable; the protocol records it.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    groups: int = Field(ge=1, description="Number of distinct prefixes.")
    prefix_tokens: int = Field(ge=1, description="Tokens of each prefix (exact under the tokenizer).")
    salt: Literal["per_run", "none"] | str = Field("per_run", description="per_run | none | a fixed marker.")


class DurationDist(BaseModel):
    """A declared distribution of durations in seconds (think times): fixed, uniform or exponential."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    dist: Literal["fixed", "uniform", "exponential"] = Field(
        "fixed",
        description="The distribution: fixed (value), uniform (low..high) or exponential (mean).",
    )
    value: float | None = Field(None, ge=0, description="fixed: the duration in s.")
    low: float | None = Field(None, ge=0, description="uniform: shortest, in s.")
    high: float | None = Field(None, ge=0, description="uniform: longest, in s.")
    mean: float | None = Field(None, ge=0, description="exponential: mean, in s.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        needed = {"fixed": ("value",), "uniform": ("low", "high"), "exponential": ("mean",)}[self.dist]
        missing = [n for n in needed if getattr(self, n) is None]
        if missing:
            raise ValueError(f"dist: {self.dist} needs {', '.join(needed)}; missing {', '.join(missing)}")
        if self.dist == "uniform" and self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"uniform needs low <= high (got {self.low}, {self.high})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` durations in s (float64)."""
        if self.dist == "fixed":
            assert self.value is not None
            return np.full(n, float(self.value))
        if self.dist == "uniform":
            assert self.low is not None and self.high is not None
            return rng.uniform(self.low, self.high, size=n)
        assert self.mean is not None
        return rng.exponential(self.mean, size=n) if self.mean > 0 else np.zeros(n)


class SessionSpec(BaseModel):
    """Multi-turn sessions: each scheduled arrival starts a session of `turns` turns. A turn's
    request carries the whole conversation so far, with the engine's own earlier answers; the
    next turn is sent `think_time_s` after the previous answer ended. `input_tokens` is the
    length of each new user message; `output_tokens` the budget of each answer."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    turns: LengthDist | int = Field(description="Turns per session: a number or a length distribution.")
    think_time_s: DurationDist | float = Field(0.0, description="Pause between an answer and the next turn.")

    def turns_dist(self) -> LengthDist:
        return self.turns if isinstance(self.turns, LengthDist) else LengthDist(dist="fixed", value=self.turns)

    def think_dist(self) -> DurationDist:
        t = self.think_time_s
        return t if isinstance(t, DurationDist) else DurationDist(dist="fixed", value=float(t))


class StructuredOutputSpec(BaseModel):
    """A share of requests asks for JSON under a JSON Schema (`response_format`, or the engine's
    own field where it does not take `response_format`); each answer is validated afterwards."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    share: float = Field(1.0, ge=0, le=1, description="Fraction of requests carrying the schema.")
    json_schema: dict[str, Any] | None = Field(
        None, alias="schema", description="The JSON Schema; None: the bundled `record` schema.")


class ToolsSpec(BaseModel):
    """A share of requests carries `tools` (and `tool_choice`); streamed calls are assembled and
    their arguments validated against the called tool's parameter schema."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    share: float = Field(1.0, ge=0, le=1, description="Fraction of requests carrying the tools.")
    tools: list[dict[str, Any]] | None = Field(None, description="OpenAI tool definitions; None: the bundled ones.")
    tool_choice: Any = Field("required", description="auto | required | none | {type: function, ...}.")


class ImagesSpec(BaseModel):
    """Requests with images, generated deterministically (a seeded pattern, PNG) and sent as
    base64 data URLs in the user message."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    share: float = Field(1.0, ge=0, le=1, description="Fraction of requests with images.")
    count: int = Field(1, ge=1, le=16, description="Images per request.")
    sizes: list[str] = Field(default_factory=lambda: ["512x512"], description="WIDTHxHEIGHT, drawn per image.")

    @model_validator(mode="after")
    def _sizes(self) -> Self:
        for size in self.sizes:
            parts = size.lower().split("x")
            if len(parts) != 2 or not all(p.isdigit() and 0 < int(p) <= 4096 for p in parts):
                raise ValueError(f"images.sizes: {size!r} is not WIDTHxHEIGHT with both in 1..4096")
        if not self.sizes:
            raise ValueError("images.sizes needs at least one WIDTHxHEIGHT")
        return self

    def dims(self) -> list[tuple[int, int]]:
        return [(int(w), int(h)) for w, h in (s.lower().split("x") for s in self.sizes)]


class DocumentsSpec(BaseModel):
    """Rerank and score: each request is a query of `input_tokens` tokens and `count` documents
    of `tokens` tokens each (both drawn per request)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    count: LengthDist | int = Field(8, description="Documents per request: a number or a length distribution.")
    tokens: LengthDist = Field(default_factory=lambda: LengthDist(dist="fixed", value=128),
                               description="Tokens of each document.")

    def count_dist(self) -> LengthDist:
        return self.count if isinstance(self.count, LengthDist) else LengthDist(dist="fixed", value=self.count)


class AudioSpec(BaseModel):
    """Audio transcription: each request sends one clip, generated (a speech-like signal of a
    drawn duration, see `_audio.py`) or, with `files`, your WAV files taken in turn."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    duration_s: DurationDist | float = Field(5.0, description="Generated clips: their duration in s (0.1 to 600).")
    files: list[str] = Field(default_factory=list, description="WAV files to send instead, in turn.")

    def duration_dist(self) -> DurationDist:
        d = self.duration_s
        return d if isinstance(d, DurationDist) else DurationDist(dist="fixed", value=float(d))


class WorkloadSpec(BaseModel):
    """What is sent: prompt lengths, output budgets, tokenizer, seed and the traffic shape.

    `requests` is the size of the materialized pool (sessions, for multi-turn); None lets the load
    decide (open loop: one per scheduled arrival; closed loop: enough for the run, cycled in order).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True, allow_inf_nan=False)

    preset: str | None = Field(None, description="Start from workloads/presets/<name>.yaml.")
    tokenizer: str = Field(
        "auto",
        description="auto | a local tokenizer folder | gguf:<file> | none (approximate lengths); a leading {cache} "
                    "is the cache scripts/setup.sh fills ($PASSPORT_CACHE, default ~/.cache/passport).",
    )
    input_tokens: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="fixed", value=256),
        description="Prompt length in tokens under the tokenizer (per turn, for sessions).",
    )
    output_tokens: LengthDist = Field(
        default_factory=lambda: LengthDist(dist="fixed", value=128),
        description="Output budget in tokens, sent as max_tokens (and enforced where supported).",
    )
    requests: int | None = Field(None, ge=1, le=10_000_000, description="Pool size; None: derived from the load.")
    seed: int | None = Field(None, description="Workload seed; None: load.seed.")
    text: Literal["words", "corpus"] = Field(
        "words", description="words: seeded random English words; corpus: natural text from the bundled corpus.")
    shared_prefix: SharedPrefixSpec | None = Field(
        None, description="Requests share one of G prefixes of P tokens; input_tokens is then the suffix.")
    source: ImportSpec | None = Field(
        None, description="Your own traffic: a request log (openai JSONL or sharegpt) instead of synthetic prompts; "
                          "output_tokens then only fills budgets the log lacks.")
    sessions: SessionSpec | None = Field(None, description="Multi-turn sessions (chat API).")
    structured_output: StructuredOutputSpec | None = Field(
        None,
        description="Requests that ask for JSON under a schema; each answer is checked against it.",
    )
    tools: ToolsSpec | None = Field(
        None,
        description="Requests that offer tools; each tool call is checked against its schema.",
    )
    images: ImagesSpec | None = Field(None, description="Images in the user message (chat API).")
    mix: list[MixComponent] | None = Field(
        None, description="A weighted mix of workloads; the other shape fields then stay unset.")
    inputs_per_request: LengthDist | int = Field(
        1, description="Embeddings: inputs per request (a batch), each of input_tokens tokens.")
    documents: DocumentsSpec | None = Field(
        None, description="Rerank and score: documents per request and their length; input_tokens is the query's.")
    audio: AudioSpec | None = Field(None, description="Audio transcription: the clips sent.")

    @field_validator("tokenizer")
    @classmethod
    def _in_cache(cls, value: str) -> str:
        return in_cache(value)

    @model_validator(mode="before")
    @classmethod
    def _expand_preset(cls, data: Any) -> Any:
        return _with_preset(data)

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if self.mix is not None:
            shaped = [name for name in ("shared_prefix", "source", "sessions", "structured_output", "tools", "images")
                      if getattr(self, name) is not None]
            if shaped:
                raise ValueError(f"a mix declares its shapes in its components; move {', '.join(shaped)} into one")
            if not self.mix:
                raise ValueError("mix needs at least one component")
            names = [c.name for c in self.mix]
            if len(set(names)) != len(names):
                raise ValueError(f"mix component names must be distinct (got {names})")
        pooled = [name for name in ("documents", "audio") if getattr(self, name) is not None] + (
            ["inputs_per_request"] if self.inputs_per_request != 1 else [])
        if pooled:
            other = [name for name in ("shared_prefix", "source", "sessions", "structured_output", "tools", "images",
                                       "mix") if getattr(self, name) is not None]
            if other or len(pooled) > 1:
                raise ValueError(f"workload {' and '.join(pooled)} make their own requests; "
                                 f"{', '.join(other + pooled[1:])} do not go with {pooled[0]}")
        for name, count in (("inputs_per_request", self.inputs_per_request),
                            ("documents.count", self.documents.count if self.documents else 1)):
            if isinstance(count, int) and not 1 <= count <= 4096:
                raise ValueError(f"{name}: {count} is outside 1 to 4096")
        if self.audio is not None:
            low = self.audio.duration_dist()
            for value in (low.value, low.low, low.high, low.mean):
                if value is not None and not 0.1 <= value <= 600:
                    raise ValueError(f"audio.duration_s: {value} is outside 0.1 to 600 s")
        if self.source is not None:
            other = [name for name in ("shared_prefix", "sessions", "structured_output", "tools", "images")
                     if getattr(self, name) is not None] + (["text"] if self.text != "words" else [])
            if other:
                raise ValueError(f"workload.source replays a log as it is (its own tools and response formats); "
                                 f"{', '.join(other)} do not apply: drop them, or mix the log with another component")
        return self

    @property
    def extended(self) -> bool:
        """True when the materialized table needs the extended columns (see _requestset)."""
        return bool(self.mix or self.sessions or self.structured_output or self.tools or self.images
                    or self.text != "words" or self.pooled)

    @property
    def pooled(self) -> bool:
        """True when each request carries several inputs, documents or a clip (see _requestset)."""
        return bool(self.documents or self.audio or self.inputs_per_request != 1)

    def inputs_dist(self) -> LengthDist:
        n = self.inputs_per_request
        return n if isinstance(n, LengthDist) else LengthDist(dist="fixed", value=n)

    def needs_chat(self) -> list[str]:
        """The shapes here (and in mix components) that only the chat API can carry."""
        out = [name for name in ("sessions", "tools", "images") if getattr(self, name) is not None]
        for component in self.mix or []:
            out += [f"mix.{component.name}.{n}" for n in component.workload.needs_chat()]
        return out


class MixComponent(BaseModel):
    """One part of a weighted mix: a name (recorded per request), a weight and a workload."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(min_length=1, description="Recorded in the `shape` column of its requests.")
    weight: float = Field(gt=0, description="Relative share of arrivals.")
    workload: WorkloadSpec = Field(description="This component's workload.")

    @model_validator(mode="after")
    def _flat(self) -> Self:
        if self.workload.mix is not None:
            raise ValueError(f"mix component {self.name!r} is itself a mix; flatten it")
        own = sorted({"tokenizer", "seed"} & self.workload.model_fields_set)
        if own:
            raise ValueError(f"mix component {self.name!r} sets {', '.join(own)}; a mix has one tokenizer and one "
                             "seed, set them on the mix")
        return self


WorkloadSpec.model_rebuild()
