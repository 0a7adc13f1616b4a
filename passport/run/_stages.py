"""What each stage of a run hands the next (docs/concepts/design.md, data flow): plain frozen records, so a
stage's inputs and outputs are explicit and none steers another by exception.

    open_run -> Opened -> identify -> Identified -> plan -> Planned -> gate_on_canaries -> Gate
      -> prepare -> Prepared (passport.draft.json written) -> time_run -> Timed -> finalize
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from canaries import AccuracySet, CaseResult, Suite
from harness import ProgressSink, RepetitionResult, Schedule
from passport._errors import PassportError, StageFailure
from passport.audit import CanaryFigures
from passport.model import DeclaredInfo, Override, RunSpec, SourcedValue
from passport.run._endpoint import Access
from workloads import LoadedTokenizer, RequestSet

__all__ = ["Opened", "Identified", "Planned", "Gate", "Prepared", "Timed", "Say", "ProgressFactory", "in_stage"]

Say = Callable[[str], None]
ProgressFactory = Callable[[int | None, int], ProgressSink]  # (requests to send or None, worker processes)


@dataclass(frozen=True)
class Opened:
    """The run's constants: the spec as declared, its folder and id, the suite it names, and the
    signing key checked before anything is sent."""

    spec: RunSpec
    raw_spec: dict[str, Any]
    overrides: list[Override]
    folder: Path
    run_id: str
    started_utc: str
    run_start_ns: int
    headers: dict[str, str]
    suite: Suite | None
    force: bool
    signing: str = ""  # which key will sign the passport, as a sentence (said before anything is sent)
    accuracy_sets: tuple[AccuracySet, ...] = ()  # the spec's accuracy sets, materialized before anything is sent


@dataclass(frozen=True)
class Identified:
    """What the endpoint is: its URL (without credentials) and model, the engine, every identity
    field, the tokenizer, and the way every later stage reaches it."""

    base_url: str
    model_id: str
    engine: str | None
    identity: dict[str, SourcedValue]
    tokenizer: LoadedTokenizer
    tokenizer_note: str | None
    access: Access


@dataclass(frozen=True)
class Planned:
    """The offered load, materialized and hashed, and the declarations frozen before timing.
    `t0_ns` is the run clock's zero: every `*_ns` column counts from it."""

    schedule: Schedule
    request_set: RequestSet
    entries: np.ndarray
    n_offered: int
    params: dict[str, Any]
    max_tokens_is_target: bool
    declared: DeclaredInfo
    t0_ns: int
    t0_utc: str


@dataclass(frozen=True)
class Gate:
    """The canaries' verdict before timing; `proceed` is False on HOLD."""

    info: CanaryFigures
    results: list[CaseResult] | None
    proceed: bool
    accuracy_alone: tuple[dict[str, Any], ...] = ()  # accuracy.parquet rows of the items scored alone


@dataclass(frozen=True)
class Prepared:
    """Decided right before the timed phase: `params`, the fields every request carries (with
    what the prefix-cache policy added), the cache policy's record, the telemetry sources, the
    structured-output form and the server's tokenizer check."""

    params: dict[str, Any]
    prefix_cache: dict[str, Any]
    telemetry: dict[str, Any]
    structured_output_form: str | None = None
    tokenizer_check: dict[str, Any] | None = None
    workers: dict[str, Any] | None = None  # load.workers resolved: count, how, the calibration


@dataclass(frozen=True)
class Timed:
    """What the timed phase did (or why there was none)."""

    repetitions: list[RepetitionResult]
    stop_reason: str | None
    workers: dict[str, Any] | None = None  # what the run learned about its workers (Ray: their clocks)


@contextlib.contextmanager
def in_stage(stage: str, folder: Path, passes: tuple[type[Exception], ...] = (PassportError,)) -> Iterator[None]:
    """Carry an exception out of `stage` as a StageFailure naming the run folder (the CLI then
    says where the records are and how to finish the passport). Exceptions of the `passes` types
    go on as they are: before the timed phase our own errors already say what to fix; after it,
    every error is carried (`passes=()`). A StageFailure from an inner stage keeps its stage."""
    try:
        yield
    except StageFailure:
        raise
    except passes:
        raise
    except Exception as exc:
        raise StageFailure(stage, str(folder), exc) from exc
