"""Assemble, write and read passports.

`assemble_passport` builds the four parts: identity (collected), protocol (declared and
effective), results (recomputed from the Parquet files by `passport.metrics`, never from
memory), validity (rules over those results). `write_passport` writes `passport.json`,
`report.md` and `report.html`; `read_passport` refuses an unknown schema version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from harness import RepetitionResult, Schedule
from passport._errors import RunFolderError
from passport._identity import sha256_file
from passport._model import (
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    CanaryInfo,
    ClockInfo,
    DeclaredInfo,
    FileEntry,
    HarnessInfo,
    MetricDefinition,
    Override,
    Passport,
    Protocol,
    Results,
    ScheduleInfo,
    SourcedValue,
    Validity,
    WorkloadInfo,
)
from passport._report import run_report_blocks, write_reports
from passport._spec import RunSpec
from passport._validity import RunFacts, count_outcomes, evaluate, offered_and_achieved_rates, verdict_of
from passport.metrics import METRICS, load_table
from passport.results import compute_results
from workloads import RequestSet

__all__ = ["assemble_passport", "write_passport", "read_passport", "file_entries", "RAW_FILES"]

RAW_FILES = ("requests.parquet", "chunks.parquet", "telemetry.parquet", "schedule.parquet", "engine.log",
             "declared.json", "canaries.parquet")


def file_entries(folder: Path) -> dict[str, FileEntry]:
    """sha256, size and (for Parquet) row count of each raw file present in the run folder."""
    entries = {}
    for name in RAW_FILES:
        path = folder / name
        if path.is_file():
            rows = pq.ParquetFile(path).metadata.num_rows if name.endswith(".parquet") else None
            entries[name] = FileEntry(sha256=sha256_file(path), bytes=path.stat().st_size, rows=rows)
    return entries


def _context_needed(request_set: RequestSet) -> int | None:
    """The longest request's prompt (client count) plus its output budget, in tokens; a
    session's last turn carries every earlier message and answer (at their budgets), so its
    need is the session's whole sum."""
    table = request_set.table
    if not table.num_rows:
        return None
    prompt = table.column("input_tokens_client").to_pylist()
    output = table.column("output_tokens_target").to_pylist()
    sessions = table.column("session").to_pylist() if "session" in table.column_names else [None] * len(prompt)
    need: dict[object, int] = {}
    for i, (p, o, s) in enumerate(zip(prompt, output, sessions)):
        key = ("session", s) if s is not None else i
        need[key] = need.get(key, 0) + int(p or 0) + int(o or 0)
    return max(need.values())


def _int_value(value: SourcedValue | None) -> int | None:
    return value.value if value is not None and isinstance(value.value, int) else None


def _via(value: SourcedValue | None) -> str | None:
    return None if value is None else f"{value.source}: {value.via}"


def assemble_passport(
    *,
    folder: Path,
    run_id: str,
    spec: RunSpec,
    raw_spec: dict[str, Any],
    overrides: list[Override],
    identity: dict[str, SourcedValue],
    request_set: RequestSet,
    tokenizer_note: str | None,
    schedule: Schedule,
    params: dict[str, Any],
    max_tokens_is_target: bool,
    t0_ns: int,
    t0_utc: str,
    started_utc: str,
    finished_utc: str,
    repetitions: list[RepetitionResult],
    stop_reason: str | None,
    canaries: CanaryInfo,
    launched_engine: bool,
    harness: HarnessInfo,
    declared: DeclaredInfo | None = None,
    canary_counts: dict[str, int] | None = None,
    telemetry: dict[str, Any] | None = None,
    prefix_cache: dict[str, Any] | None = None,
    canary_suite: dict[str, Any] | None = None,
    salt: str | None = None,
    workload_extra: dict[str, Any] | None = None,
) -> Passport:
    """The passport of a finished (or stopped) run; results come from the files in `folder`."""
    results = compute_results(folder)
    requests = load_table(folder, "requests")
    assert requests is not None
    discard = results.get("discard") or {}
    discarded = [d["repetition"] for d in discard.get("discarded", [])]
    counts = count_outcomes(requests, discarded)
    if canary_counts is not None:
        counts.update(canary_counts)
    complete = stop_reason is None and len(repetitions) == spec.load.repetitions
    facts = RunFacts(
        complete=complete,
        incomplete_reason=stop_reason or (None if complete else "not every repetition ran"),
        open_loop=spec.load.open_loop,
        launched_engine=launched_engine,
        git_dirty=harness.git_dirty,
        exact_lengths=request_set.exact_lengths,
        canaries=canaries,
        forced=canaries.forced,
        context_needed_tokens=_context_needed(request_set),
        context_capacity_tokens=_int_value(identity.get("capacity.context_per_sequence")),
        capacity_source=_via(identity.get("capacity.context_per_sequence")),
        tokenizer_check=(workload_extra or {}).get("tokenizer_check"),
    )
    rules = evaluate(results, counts, facts, spec.validity, offered_and_achieved_rates(requests, discarded))
    verdict = verdict_of(rules, facts)
    pool_cycles = max((r.pool_cycles for r in repetitions), default=0)
    note = tokenizer_note
    if pool_cycles:
        cycle_note = f"closed loop cycled the {schedule.pool_size}-request pool {pool_cycles} time(s): prompts repeat"
        note = f"{note}; {cycle_note}" if note else cycle_note
    elif spec.load.open_loop and schedule.table.num_rows > schedule.pool_size:
        cycle_note = (f"the schedule's {schedule.table.num_rows} arrivals cycle the {schedule.pool_size} distinct "
                      "requests (a log shorter than the schedule): prompts repeat")
        note = f"{note}; {cycle_note}" if note else cycle_note
    protocol = Protocol(
        spec=raw_spec,
        effective=spec.model_dump(mode="json"),
        overrides=overrides,
        workload=WorkloadInfo(
            sha256=request_set.sha256, n_requests=len(request_set), seed=request_set.seed,
            tokenizer=request_set.tokenizer_source, tokenizer_sha256=request_set.tokenizer_sha256,
            exact_lengths=request_set.exact_lengths, note=note, salt=salt, **(workload_extra or {}),
        ),
        schedule=ScheduleInfo(
            sha256=schedule.sha256, pattern=str(spec.load), n_scheduled=schedule.table.num_rows,
            n_warmup=schedule.n_warmup, window_s=None if schedule.window_ns is None else schedule.window_ns / 1e9,
            seed=spec.load.seed,
        ),
        harness=harness,
        clock=ClockInfo(clock="CLOCK_MONOTONIC (time.perf_counter_ns), ns since t0", t0_perf_counter_ns=t0_ns,
                        t0_utc=t0_utc),
        seeds={"workload": request_set.seed, "schedule": spec.load.seed, "sampling": spec.decoding.seed},
        request_params=params,
        max_tokens_is_target=max_tokens_is_target,
        prefix_cache=prefix_cache or {"declared": spec.prefix_cache, "enforced": False, "method": "not applied"},
        metric_definitions={
            m.id: MetricDefinition(version=m.version, unit=m.unit, definition=m.definition) for m in METRICS.values()
        },
        started_utc=started_utc,
        finished_utc=finished_utc,
        declared=declared,
        telemetry=telemetry,
        canary_suite=canary_suite,
    )
    validity = Validity(verdict=verdict, complete=complete, incomplete_reason=facts.incomplete_reason,
                        forced=canaries.forced, canaries=canaries, rules=rules, counts=counts)
    return Passport(
        schema_version=SCHEMA_VERSION, run_id=run_id, name=spec.name, created_utc=finished_utc, verdict=verdict,
        identity=dict(sorted(identity.items())), protocol=protocol, validity=validity,
        results=Results.model_validate(results), files=file_entries(folder),
    )


def write_passport(folder: Path, passport: Passport) -> Path:
    """Write passport.json (atomically), report.md and report.html; returns the passport's path."""
    path = folder / "passport.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(passport.model_dump_json(indent=2) + "\n")
    tmp.replace(path)
    write_reports(folder, f"Passport: {passport.name}", run_report_blocks(passport, folder))
    return path


def read_passport(path: Path) -> Passport:
    """Load a passport.json (or a run folder's); refuses schema versions it does not know."""
    path = Path(path)
    if path.is_dir():
        path = path / "passport.json"
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise RunFolderError(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path} is not valid JSON: {exc}") from exc
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise RunFolderError(
            f"{path}: passport schema_version {version!r} is not supported by this passport "
            f"(knows {', '.join(SUPPORTED_SCHEMA_VERSIONS)}); upgrade passport"
        )
    return Passport.model_validate(data)
