"""Canary suites: declarative cases in YAML, each with an id, a version and a hash.

A suite file:

```yaml
suite: my-suite
version: 1
description: what this suite proves
cases:
  - id: capital            # unique in the suite
    version: 1             # bump when the case changes meaning
    kind: exact            # exact | json | tool | multi_turn | coding | long_context | accounting
    api: completions       # chat (default) | completions
    prompt: "The capital of France is"      # completions; chat takes messages (or prompt as one user turn)
    max_tokens: 8
    expect: {text: " Paris"}                # per kind, see CaseSpec.expect
```

Every case is sent with greedy decoding (temperature 0, `seed`, both overridable in `params`)
and streamed through the harness's own transport. The suite hash (sha256 of the canonical JSON
of every case) goes into the passport's protocol, so two passports name the exact cases they
passed. Bundled suites live in `canaries/suites/`; `load_suite` takes a bundled name or a path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from passport._errors import PassportError
from workloads import load_yaml

__all__ = ["CaseSpec", "Suite", "CanaryError", "load_suite", "bundled_suites", "SUITES_DIR", "KINDS", "CASE_APIS"]

SUITES_DIR = Path(__file__).resolve().parent / "suites"
KINDS = ("exact", "json", "tool", "multi_turn", "coding", "long_context", "accounting", "embedding_deterministic",
         "embedding_semantic", "embedding_shape", "rerank_order", "transcript")
# The endpoint kinds each case kind runs on (the text kinds: any API that generates text)
_TEXT_APIS = ("chat", "completions", "responses", "anthropic_messages")
CASE_APIS: dict[str, tuple[str, ...]] = {
    **{kind: _TEXT_APIS for kind in KINDS[:7]},
    "embedding_deterministic": ("embeddings",), "embedding_semantic": ("embeddings",),
    "embedding_shape": ("embeddings",), "rerank_order": ("rerank", "score"), "transcript": ("audio_transcriptions",),
}


class CanaryError(PassportError):
    """A suite that cannot be read or is not valid, or cannot run here (SandboxUnavailable)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Needle(_Strict):
    depth: float = Field(ge=0, le=1, description="Where in the context, 0 = start, 1 = end.")
    text: str
    expect: str = Field(description="What the answer must contain when the needle was retrieved.")


class CaseSpec(_Strict):
    """One canary case. `expect` by kind:

    - exact: `text`, the whole output exactly (`passport canary --record FILE` writes it from a
      trusted endpoint; a case without one fails, saying so); or `answer`, the output's last word
      or number (thousands separators dropped, case ignored): a model-agnostic exact answer.
    - json: `schema` is the JSON Schema sent as response_format and validated afterwards.
    - tool: `tools` (OpenAI tool definitions) and `tool_choice`; expect `name` (optional: the tool
      that must be called); arguments must validate against that tool's parameter schema.
    - multi_turn: `turns` (user messages; each request carries the real answers so far); expect
      `contains` (in the last answer, case-insensitive).
    - coding: the answer's code must pass `tests` (Python asserts) in a sandbox within `timeout_s`.
    - long_context: `context_tokens` of natural filler with `needles` at depths, then `question`.
    - accounting: always: usage reported, at most max_tokens tokens, and the stop consistent with
      the length (`length` exactly at max_tokens, `stop` below it); optionally `finish_reason`,
      `completion_tokens`, `usage_matches_chunks: true` (one token per streamed chunk) and
      `reasoning: separate`.
    - embedding_deterministic: `prompt` embedded twice, in two requests; the vectors' cosine is at
      least `min_cosine` (default 0.9999).
    - embedding_semantic: `prompt` with `inputs` [a paraphrase, an unrelated sentence] in one
      request; the paraphrase must be closer (cosine) than the unrelated sentence, by `margin`
      (default 0).
    - embedding_shape: `prompt` and `inputs` of other lengths in one request; every vector has one
      length, `dimension` when given, and length 1 when `normalized: true` (not 1 when false).
    - rerank_order: `prompt` is the query and `inputs` the documents; the highest score must go to
      document `first` (default 0).
    - transcript: `audio_file` (a WAV; a relative path is read beside the suite file) or a
      generated speech-like clip of `audio_s` seconds; `contains` (case and punctuation ignored)
      when given, else a complete transcription (a generated clip carries no words to check).
    """

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    version: int = Field(1, ge=1)
    kind: Literal["exact", "json", "tool", "multi_turn", "coding", "long_context", "accounting",
                  "embedding_deterministic", "embedding_semantic", "embedding_shape", "rerank_order", "transcript"]
    description: str = ""
    api: Literal["auto", "chat", "completions", "responses", "anthropic_messages", "audio_transcriptions",
                 "embeddings", "rerank", "score"] = Field("auto", description="auto: the run's endpoint.api.")
    prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    max_tokens: int = Field(32, ge=1)
    params: dict[str, Any] = Field(default_factory=dict, description="Extra body fields (override defaults).")
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    turns: list[str] | None = None
    tests: str | None = None
    timeout_s: float = Field(5.0, gt=0)
    context_tokens: int | None = Field(None, ge=16)
    needles: list[Needle] | None = None
    question: str | None = None
    inputs: list[str] | None = Field(None, description="embedding_*: the other inputs; rerank_order: the documents.")
    audio_file: str | None = Field(None, description="transcript: a WAV file (relative: beside the suite file).")
    audio_s: float = Field(3.0, gt=0, le=600, description="transcript without audio_file: the generated clip's s.")
    expect: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="after")
    def _kind_fields(self) -> Self:
        need: dict[str, tuple[str, ...]] = {
            "json": ("schema_",), "tool": ("tools",), "multi_turn": ("turns",), "coding": ("tests",),
            "long_context": ("context_tokens", "needles", "question"), "embedding_semantic": ("inputs",),
            "rerank_order": ("inputs",),
        }
        missing = [name.rstrip("_") for name in need.get(self.kind, ()) if getattr(self, name) is None]
        if missing:
            raise ValueError(f"case {self.id!r} ({self.kind}) needs {', '.join(missing)}")
        if self.kind == "embedding_semantic" and len(self.inputs or []) != 2:
            raise ValueError(f"case {self.id!r} (embedding_semantic) needs inputs: [a paraphrase, an unrelated text]")
        if self.kind in ("exact", "json", "tool", "coding", "accounting", "embedding_deterministic",
                         "embedding_semantic", "embedding_shape", "rerank_order") and self.prompt is None \
                and self.messages is None:
            raise ValueError(f"case {self.id!r} needs prompt or messages")
        if self.api == "completions" and self.kind in ("json", "tool", "multi_turn") and self.messages is not None:
            raise ValueError(f"case {self.id!r}: completions takes a prompt, not messages")
        return self

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_defaults=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(json.dumps(self.canonical(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class Suite(_Strict):
    suite: str
    version: int = Field(1, ge=1)
    description: str = ""
    cases: list[CaseSpec] = Field(min_length=1)
    source: str | None = Field(None, exclude=True, description="Where it was read from (not hashed).")

    @model_validator(mode="after")
    def _unique_ids(self) -> Self:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"case id {case.id!r} appears twice")
            seen.add(case.id)
        return self

    @property
    def sha256(self) -> str:
        body = {"suite": self.suite, "version": self.version, "cases": [c.canonical() for c in self.cases]}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def to_yaml(self) -> str:
        data = {"suite": self.suite, "version": self.version, "description": self.description,
                "cases": [c.model_dump(mode="json", by_alias=True, exclude_defaults=True) | {"id": c.id, "kind": c.kind}
                          for c in self.cases]}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


def bundled_suites() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))


_MAX_SUITE_BYTES = 4 * 2**20


def load_suite(name_or_path: str) -> Suite:
    """A bundled suite by name, or a suite file by path; raises CanaryError saying what is wrong."""
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        bundled = SUITES_DIR / f"{name_or_path}.yaml"
        if not bundled.is_file():
            raise CanaryError(f"canary suite {name_or_path!r} is neither a file nor a bundled suite "
                              f"({', '.join(bundled_suites())})")
        path = bundled
    try:
        if path.stat().st_size > _MAX_SUITE_BYTES:  # is_file() above: a regular file, so its size is its length
            raise ValueError(f"it is {path.stat().st_size:,} bytes; a suite is at most {_MAX_SUITE_BYTES:,}")
        data = load_yaml(path.read_bytes(), f"canary suite {path}")  # strict, and bounded in what aliases expand to
    except (OSError, ValueError) as exc:
        raise CanaryError(f"cannot read canary suite {path}: {exc}") from exc
    try:
        suite = Suite.model_validate(data)
    except ValidationError as exc:
        lines = [f"  {'.'.join(str(p) for p in e['loc']) or '(suite)'}: {e['msg'].removeprefix('Value error, ')}"
                 for e in exc.errors()]
        raise CanaryError(f"invalid canary suite {path}:\n" + "\n".join(lines)) from None
    suite.source = str(path)
    return suite
