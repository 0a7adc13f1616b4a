"""The run spec: YAML in, a validated `RunSpec` out, with one clear message per bad field.

Every field but the endpoint (or an `engine.launch`) and `load.pattern` (with its rate or
concurrency) has a default, so a three-line spec runs. Unknown fields are errors (a typo must
never silently change a benchmark); the message suggests the closest known name.
"""

from __future__ import annotations

import copy
import difflib
import math
import os
import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_serializer, field_validator, model_validator

from harness import LimitsSpec, LoadSpec, TimeoutSpec, scrub
from passport._errors import SpecError
from passport._input import read_bounded
from passport.audit._declared import parse_discard_rule, parse_slo
from passport.audit._units import parse_duration_s
from workloads import AudioSpec, DocumentsSpec, WorkloadSpec, in_cache, load_yaml

__all__ = ["RunSpec", "EndpointSpec", "EngineSpec", "DecodingSpec", "ValiditySpec",
           "AccuracySpec", "AccuracySetSpec", "TimeoutSpec", "LimitsSpec",
           "SweepSpec", "CostSpec",
           "load_spec", "parse_spec"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class EndpointSpec(_Strict):
    """The OpenAI-compatible endpoint under test."""

    base_url: str | None = Field(None, description="e.g. http://127.0.0.1:8080/v1; None: from engine.launch.")

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must look like http://HOST:PORT/v1 (http or https, with a host)")
        try:
            port = parts.port  # urllib checks the range only when asked
        except ValueError:
            port = 0
        if port == 0:
            raise ValueError("its port must be a number from 1 to 65535")
        return value

    api: Literal["chat", "completions", "responses", "anthropic_messages", "audio_transcriptions", "embeddings",
                 "rerank", "score"] = Field(
        "chat", description="The endpoint kind: chat | completions | responses | anthropic_messages | "
                            "audio_transcriptions | embeddings | rerank | score.")
    model: str = Field("auto", description="Model id; auto = the first id from /v1/models.")
    api_key_env: str | None = Field(None, description="Name of the environment variable holding the key.")
    ca_file: str | None = Field(None, description="https: PEM file of CAs to trust instead of the system's.")


class EngineSpec(_Strict):
    """An engine the harness launches, watches and stops."""

    launch: str = Field(description="Command template with {port}, {host}, {model_path}.")
    model_path: str | None = Field(None, description="Fills {model_path}; a .gguf also gives the tokenizer. A leading "
                                                     "{cache} is the cache scripts/setup.sh fills ($PASSPORT_CACHE, "
                                                     "default ~/.cache/passport).")
    port: int | None = Field(None, ge=1, le=65535, description="Fixed port; None: a free one.")
    health_timeout_s: float = Field(180.0, gt=0, description="How long to wait for /health.")

    @field_validator("model_path")
    @classmethod
    def _in_cache(cls, value: str | None) -> str | None:
        """`{cache}/models/x.gguf` where the set-up put it: the bundled specs follow $PASSPORT_CACHE."""
        return None if value is None else in_cache(value)

    def program(self) -> str:
        """The program this launch runs (see `program_of`)."""
        return self.program_of(shlex.split(self.launch))

    @staticmethod
    def program_of(argv: list[str]) -> str:
        """The program a command runs: past `env` and its NAME=VALUE settings and flags
        (`env OMP_NUM_THREADS=1 vllm serve ...` runs vllm, not env)."""
        if not argv or os.path.basename(argv[0]) != "env":
            return argv[0] if argv else ""
        rest = argv[1:]
        while rest and ("=" in rest[0] or rest[0].startswith("-")):
            rest = rest[2:] if rest[0] in ("-u", "--unset", "-C", "--chdir") else rest[1:]
        return rest[0] if rest else argv[0]


class DecodingSpec(_Strict):
    """Sampling and output-length policy sent with every request: a preset (instruct: temperature
    0.7, top_p 0.8, top_k 20; thinking: 1.0, 0.95, 20, presence_penalty 1.5; explicit: nothing)
    with the fields declared here replacing its own."""

    preset: Literal["instruct", "thinking", "explicit"] = Field(
        "instruct",
        description="instruct: the model's chat defaults; thinking: reasoning on, sampled as its card says; "
                    "explicit: only the fields given here.",
    )
    temperature: float | None = Field(
        None, ge=0,
        description="Sampling temperature (0: greedy); none: the preset's or the server's.",
    )
    top_p: float | None = Field(
        None, gt=0, le=1,
        description="Nucleus sampling: the smallest set of tokens whose probabilities add up to this.",
    )
    top_k: int | None = Field(
        None, ge=1,
        description="Sample among the k most likely tokens (open engines; managed APIs reject it).",
    )
    presence_penalty: float | None = Field(None, ge=-2, le=2, description="OpenAI's presence penalty, -2 to 2.")
    seed: int | None = Field(None, description="Sampling seed sent as `seed`.")
    ignore_eos: Literal["auto", True, False] = Field(
        "auto", description="auto: send ignore_eos where the engine honours it, making max_tokens the target."
    )
    extra: dict[str, Any] = Field(default_factory=dict, description="Extra body fields, sent verbatim.")


class ValiditySpec(_Strict):
    """Thresholds of the validity rules (declared before the run)."""

    max_error_rate: float = Field(
        0.01, ge=0, le=1,
        description="The largest share of measured requests that may fail (rule error_rate).",
    )
    min_completed_requests: int = Field(
        1, ge=0,
        description="The fewest measured requests that must succeed (rule min_completed_requests).",
    )
    max_dispatch_lag_p99_ms: float = Field(
        10.0, gt=0, description="A send lag above this warns, however small beside the latencies (it fails above "
                                "max_lag_share of the latency it distorts).")
    max_client_cpu_share: float = Field(0.9, gt=0, description="This process's CPU share of one core (all threads).")
    max_loop_lag_p99_ms: float = Field(
        20.0, gt=0, description="An event-loop lag above this warns (it fails above max_lag_share of TTFT p50).")
    min_achieved_rate_fraction: float = Field(
        0.9, gt=0, le=1,
        description="An open loop's successful completions must keep at least this share of its schedule's pace "
                    "(rule achieved_rate; judged on the pace's 95 % interval).",
    )
    max_lag_share: float = Field(
        0.1, gt=0, description="Dispatch and loop lag fail above this share of the latency they distort: E2E p50 "
                               "(closed loop), the schedule's mean gap or TTFT p50 (open loop), TTFT p50 (loop lag).")
    lag_floor_ms: float = Field(0.25, ge=0, description="A lag at or below this never fails.")
    lag_ceiling_ms: float = Field(250.0, gt=0, description="A lag above this always fails.")


class AccuracySetSpec(_Strict):
    """One accuracy set: a bundled one (generated from `seed`: arithmetic, choice, extraction,
    recall) or a JSONL file (gsm8k, mmlu or generic layout); see docs/release/accuracy.md."""

    set: str = Field(description="A bundled set's name, or the path of a JSONL file.")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                             description="Its name in the passport (default: the set's name or the file's stem).")
    format: Literal["auto", "gsm8k", "mmlu", "generic"] = Field(
        "auto", description="A file's layout; auto reads it from the first line's keys.")
    items: int | None = Field(None, ge=1, le=100_000, description="How many items: a bundled set generates this many "
                                                                  "(default 50); a file's are drawn (seeded) from it "
                                                                  "(default all).")
    difficulty: int = Field(1, ge=1, le=3, description="A bundled set's difficulty, 1 to 3.")
    seed: int = Field(0, description="Seeds the generated items and a file's draw.")
    max_tokens: int | None = Field(None, ge=1, description="Each answer's budget (default: the set's own).")


class AccuracySpec(_Strict):
    """Accuracy sets scored alone (one item at a time, before timing) and under load (items sent
    beside the timed load at a share of its completions), compared item by item."""

    sets: list[AccuracySetSpec] = Field(min_length=1, description="The sets; a bare name is a bundled set.")
    alone: bool = Field(True, description="Score every item alone, one at a time, before timing.")
    share: float = Field(0.05, ge=0, le=0.5, description="Under load: one item beside the load per 1/share timed "
                                                          "completions, at seeded positions (0: none).")
    max_drop: float = Field(0.02, ge=0, le=1, description="A drop under load larger than this, beyond chance, is "
                                                          "judged by rule accuracy_drop.")
    alpha: float = Field(0.05, gt=0, lt=1, description="The sign test's level: a drop with p below it is beyond "
                                                       "chance.")
    on_drop: Literal["warn", "fail"] = Field("warn", description="What rule accuracy_drop says of a significant "
                                                                 "drop: WARN, or FAIL (INVALID).")

    @field_validator("sets", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"set": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _names_unique(self) -> Self:
        names = [s.name or Path(s.set).stem for s in self.sets]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"accuracy set names repeat: {', '.join(twice)} (give each a name:)")
        return self


class TelemetrySpec(_Strict):
    """Server telemetry sampled during the timed run (see harness/_telemetry.py)."""

    interval_s: float = Field(1.0, ge=0.1, le=60, description="Seconds between scrapes of every source.")
    metrics: str = Field("auto", description="auto: the engine's own /metrics where it has one; off; or a URL.")
    dcgm_url: str | None = Field(None, description="A DCGM exporter's /metrics URL (GPU memory, power, energy).")
    nvml: Literal["auto", "off"] = Field("auto", description="auto: sample local GPUs through NVML if present.")


class SweepAutoSpec(_Strict):
    """How `levels: auto` picks load levels."""

    start: float = Field(1.0, gt=0, description="concurrency: the first level; doubled (x factor) per level.")
    factor: float = Field(2.0, gt=1, description="concurrency: each level is the previous times this.")
    max_levels: int = Field(8, ge=2, le=32, description="The most load levels an automatic sweep runs.")
    probe_concurrency: int = Field(
        32, ge=1, description="rate: the closed-loop concurrency of the probe that measures the saturation rate.")
    fractions: list[float] = Field(
        default_factory=lambda: [0.25, 0.5, 0.75, 0.9, 1.0, 1.1],
        description="rate: levels as fractions of the probed saturation rate.")
    interpolate: int | None = Field(
        None, ge=1, le=64,
        description="rate: instead of `fractions`, a synchronous probe (concurrency 1) too, and this many rates "
                    "evenly spaced from its rate to the saturation rate, its own left out (guidellm's "
                    "--rate-type sweep --rate N: N - 2).")


class SweepStopSpec(_Strict):
    """The declared over-saturation rule: the sweep stops after a level that meets any of these."""

    achieved_fraction_below: float | None = Field(
        0.5, gt=0, le=1, description="rate: completions/s below this fraction of the offered rate.")
    error_rate_above: float | None = Field(0.5, ge=0, le=1, description="failed / measured requests.")
    ttft_p50_above: str | float | None = Field(None, description="success-only TTFT p50 above this duration.")

    @field_validator("ttft_p50_above")
    @classmethod
    def _duration(cls, value: str | float | None) -> str | float | None:
        if value is not None:
            parse_duration_s(value)
        return value


class SweepSpec(_Strict):
    """`passport sweep`: a series of load levels, one passport each, and a summary."""

    vary: Literal["rate", "concurrency"] = Field(
        "concurrency", description="rate: open loop at load.pattern; concurrency: closed loop.")
    levels: list[Annotated[float, Field(allow_inf_nan=True)]] | Literal["auto"] = Field(
        "auto", description="Explicit levels, ascending, or auto. vary: rate takes inf as its last level: every "
                            "request at once (a closed loop of load.concurrency users, or of all the measured "
                            "requests), vLLM's --request-rate inf.")
    arrival: Literal["poisson", "constant", "gamma"] | None = Field(
        None, description="rate: the levels' arrival process (default: load.pattern when it is an open loop, else "
                          "poisson).")
    auto: SweepAutoSpec = Field(default_factory=SweepAutoSpec, description="How `levels: auto` picks the load levels.")
    saturation_fraction: float = Field(
        0.9, gt=0, le=1, description="rate: saturated once completions/s fall below this fraction of offered.")
    saturation_gain: float = Field(
        0.1, gt=0, description="concurrency: saturated once the next level adds less than this share of throughput.")
    stop_when: SweepStopSpec = Field(
        default_factory=SweepStopSpec,
        description="When a sweep stops climbing (saturation, errors, achieved rate).",
    )
    fresh_prompts: bool = Field(
        True, description="Each level draws its own prompts (workload seed + level number), so an engine's "
                          "prompt cache carries nothing from one level to the next; false: every level sends "
                          "the same prompts.")

    @field_validator("levels", mode="before")
    @classmethod
    def _infinity(cls, value: Any) -> Any:
        """YAML and JSON write an infinite rate as the word: inf."""
        if isinstance(value, list):
            return [float("inf") if isinstance(v, str) and v.strip().lower() in ("inf", "infinity") else v
                    for v in value]
        return value

    @field_serializer("levels")
    def _inf_as_word(self, value: list[float] | str) -> list[float | str] | str:
        return value if isinstance(value, str) else ["inf" if math.isinf(v) else v for v in value]

    @field_validator("levels")
    @classmethod
    def _ascending(cls, value: list[float] | str) -> list[float] | str:
        if isinstance(value, list):
            if not value or any(not v > 0 for v in value) or sorted(value) != value or len(set(value)) != len(value):
                raise ValueError("levels must be positive, distinct and ascending, e.g. [1, 2, 4, 8]")
        return value

    @model_validator(mode="after")
    def _infinite_rate_only(self) -> SweepSpec:
        if isinstance(self.levels, list) and self.vary == "concurrency" and any(math.isinf(v) for v in self.levels):
            raise ValueError("levels: inf is a rate (every request at once); concurrency levels are whole numbers")
        return self


class CostSpec(_Strict):
    """What serving costs, for results.cost: managed per-token prices (both prices), or a card
    owned or rented by the hour (`gpu_hour_usd` x `gpus`)."""

    input_usd_per_million: float | None = Field(None, ge=0, le=1e6,
                                                description="Managed: USD per million input tokens.")
    output_usd_per_million: float | None = Field(None, ge=0, le=1e6,
                                                 description="Managed: USD per million output tokens.")
    gpu_hour_usd: float | None = Field(None, ge=0, le=1e6, description="Owned: USD per accelerator-hour.")
    gpus: int = Field(1, ge=1, le=65536, description="Owned: accelerators the endpoint occupies.")

    @model_validator(mode="after")
    def _one_basis(self) -> Self:
        prices = (self.input_usd_per_million, self.output_usd_per_million)
        managed, owned = any(p is not None for p in prices), self.gpu_hour_usd is not None
        if managed and owned:
            raise ValueError("declare managed prices (input_usd_per_million, output_usd_per_million) or an owned card "
                             "(gpu_hour_usd, gpus), not both")
        if managed and None in prices:
            raise ValueError("managed prices need both input_usd_per_million and output_usd_per_million")
        if not managed and not owned:
            raise ValueError("declare input_usd_per_million and output_usd_per_million (managed) or gpu_hour_usd "
                             "(owned)")
        return self

    @property
    def basis(self) -> Literal["managed", "owned"]:
        return "owned" if self.gpu_hour_usd is not None else "managed"


class RunSpec(_Strict):
    """A whole run, as declared. See docs/concepts/design.md "The spec" for the canonical example."""

    name: str = Field(
        "run", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="The run's name: the first part of its folder's name and of its run id.",
    )
    endpoint: EndpointSpec = Field(
        default_factory=EndpointSpec,
        description="Where the requests go: the OpenAI-compatible base URL, the API and the key's environment "
                    "variable.",
    )
    engine: EngineSpec | None = Field(
        None,
        description="An engine to launch before the run (its command line, readiness, log); none: attach to the "
                    "endpoint.",
    )
    identity: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict,
        description="Identity fields you declare (e.g. engine.build, model.quantization); probed fields the "
                    "server reports win, and each says its source.",
    )
    workload: WorkloadSpec = Field(
        default_factory=WorkloadSpec,
        description="What is sent: input and output length distributions, the tokenizer, presets, mixes, "
                    "sessions, imports.",
    )
    decoding: DecodingSpec = Field(
        default_factory=DecodingSpec,
        description="How answers are sampled: a preset (instruct, thinking, explicit) and explicit sampling "
                    "fields.",
    )
    load: LoadSpec = Field(
        description="How requests are offered: the arrival pattern, rate or concurrency, warm-up, the measured "
                    "window, repetitions, workers.",
    )
    prefix_cache: Literal["auto", "cold", "salted", "warm"] = Field(
        "auto", description="cold: empty the engine's prefix cache before timing (or a per-run salt, or no reuse, as "
                            "the engine allows; the protocol says which); salted: cold without emptying a cache "
                            "others share (a per-run cache_salt on every request: vLLM, SGLang); warm: leave what "
                            "earlier traffic left; auto: cold for a synthetic workload, warm for a replayed log.")
    canaries: str = Field("default", description="A bundled suite name or a suite file; none: skip (the passport "
                                                 "says so).")
    canary_share: float = Field(0.0, ge=0, le=0.5, description="During the timed run, one canary case after every "
                                                               "1/share completed requests (0: none).")
    accuracy: AccuracySpec | None = Field(
        None, description="Accuracy sets scored alone and under load, with the drop judged (rule accuracy_drop).")
    slo: dict[str, str | float] = Field(
        default_factory=dict, description="<metric id>.<stat>: bound, e.g. ttft.any.p99: 2s (see passport.audit).")
    discard: list[str] = Field(
        default_factory=list, description="Pre-registered discard rules per repetition (see passport.audit).")
    validity: ValiditySpec = Field(
        default_factory=ValiditySpec,
        description="The thresholds of the validity rules (docs: reference/rules).",
    )
    timeouts: TimeoutSpec = Field(
        default_factory=TimeoutSpec,
        description="Per-request time bounds: connect, first byte, stall between events, total.",
    )
    limits: LimitsSpec = Field(
        default_factory=LimitsSpec,
        description="Per-response size bounds: bytes, bytes per event, events, header bytes.",
    )
    record_text: Literal["full", "hashes"] = Field(
        "full",
        description="full: prompts and answers kept in requests.parquet; hashes: only their sha256 (for sensitive"
                    " traffic).",
    )
    telemetry: TelemetrySpec = Field(
        default_factory=TelemetrySpec,
        description="What is sampled during the run: the engine's /metrics, DCGM, NVML, and how often.",
    )
    sweep: SweepSpec | None = Field(None, description="Load levels for `passport sweep`; `passport run` ignores it.")
    cost: CostSpec | None = Field(None, description="Prices for results.cost (USD per million tokens).")

    @field_validator("slo")
    @classmethod
    def _slo_targets(cls, value: dict[str, str | float]) -> dict[str, str | float]:
        parse_slo(value)
        return value

    @field_validator("discard")
    @classmethod
    def _discard_rules(cls, value: list[str]) -> list[str]:
        for text in value:
            parse_discard_rule(text)
        return value

    @model_validator(mode="after")
    def _endpoint_or_engine(self) -> Self:
        if self.endpoint.base_url is None and self.engine is None:
            raise ValueError(
                "endpoint.base_url is required (or declare engine.launch, or pass --endpoint URL)"
            )
        chat_only = self.workload.needs_chat()
        api = self.endpoint.api
        if api in ("completions", "audio_transcriptions", "embeddings", "rerank", "score") and chat_only:
            raise ValueError(f"workload {', '.join(chat_only)} need messages (the chat, responses or "
                             f"anthropic_messages API); endpoint.api is {api}")
        self._kind_workload(api)
        if self.accuracy is not None and api not in ("chat", "completions", "responses", "anthropic_messages"):
            raise ValueError(f"accuracy sets are answered in text; endpoint.api {api} answers none (drop accuracy)")
        if self.load.pattern == "trace" and (self.workload.source is None or self.workload.mix is not None):
            raise ValueError("load.pattern: trace replays an imported log's timestamps; set workload.source "
                             "(not a mix)")
        return self


    def _kind_workload(self, api: str) -> None:
        """Each kind's workload: documents for rerank and score, a clip for audio (the defaults
        when not declared), batches only for embeddings; one kind's fields refused on another."""
        w = self.workload
        if w.mix is not None and api not in ("chat", "completions", "responses", "anthropic_messages"):
            raise ValueError(f"workload.mix is for the text-generating APIs; endpoint.api {api} takes one workload")
        if api in ("rerank", "score") and w.documents is None:
            w.documents = DocumentsSpec()
        if api == "audio_transcriptions" and w.audio is None:
            w.audio = AudioSpec()
        wrong = [name for name, ok in (("documents", api in ("rerank", "score")),
                                       ("audio", api == "audio_transcriptions"),
                                       ("inputs_per_request", api == "embeddings"))
                 if not ok and (getattr(w, name) is not None if name != "inputs_per_request"
                                else w.inputs_per_request != 1)]
        if wrong:
            raise ValueError(f"workload.{wrong[0]} does not apply to endpoint.api {api} (documents: rerank and "
                             "score; audio: audio_transcriptions; inputs_per_request: embeddings)")


def _field_names(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    current: Any = model
    for part in loc[:-1]:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        annotation = field.annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))


def _format_errors(exc: ValidationError, source: str) -> str:
    lines = []
    for error in exc.errors():
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p in ("function-after",)))
        where = ".".join(str(p) for p in loc) or "(spec)"
        if error["type"] == "extra_forbidden":
            known = _field_names(RunSpec, loc)
            close = difflib.get_close_matches(str(loc[-1]), known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known fields: {', '.join(known)}"
            lines.append(f"  {where}: unknown field{hint}")
        elif error["type"] == "missing":
            lines.append(f"  {where}: required field is missing")
        else:
            message = error["msg"].removeprefix("Value error, ")
            got = error.get("input")
            shown = "" if isinstance(got, dict) else f" (got {scrub(repr(got))})"
            lines.append(f"  {where}: {message}{shown}")
    return f"invalid spec {source}:\n" + "\n".join(lines)


class _Change(Protocol):
    field: str
    value: Any


def with_overrides(raw: dict[str, Any], overrides: Iterable[_Change]) -> dict[str, Any]:
    """The spec as written with each override applied in turn: `field` is a dotted path
    (`load.measure`), created where missing; a None value removes the field."""
    out = copy.deepcopy(raw)
    for change in overrides:
        *parents, leaf = change.field.split(".")
        node = out
        for key in parents:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        if change.value is None:
            node.pop(leaf, None)
        else:
            node[leaf] = copy.deepcopy(change.value)
    return out


def parse_spec(data: Any, source: str = "") -> RunSpec:
    """Validate a spec given as a mapping; raises SpecError listing every bad field."""
    if not isinstance(data, dict):
        raise SpecError(f"spec {source} must be a YAML mapping of fields (got {type(data).__name__})")
    try:
        return RunSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_format_errors(exc, source)) from None


def read_yaml_file(path: Path, what: str, examples: str) -> Any:
    """A YAML file's document (bounded and strict: see passport._input and workloads.load_yaml);
    SpecError when it cannot be read, is not a regular file, is too large, is not YAML, expands
    too far, or is empty (pointing at `examples`)."""
    try:
        raw = load_yaml(read_bounded(path, what), f"{what} {path}")
    except OSError as exc:
        raise SpecError(f"cannot read {what} {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if raw is None:
        raise SpecError(f"{what} {path} is empty; see {examples} for examples")
    return raw


def load_spec(path: Path) -> tuple[RunSpec, dict[str, Any]]:
    """Read and validate a YAML spec: (validated spec, the mapping exactly as written)."""
    raw = read_yaml_file(path, "spec", "specs/")
    if isinstance(raw, dict) and "arms" in raw and "run" in raw:
        raise SpecError(f"{path} is a campaign spec (it has run: and arms:); run it with `passport campaign {path}`")
    return parse_spec(raw, str(path)), raw
