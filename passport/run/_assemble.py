"""From a run's stages to its passport, in two steps.

`draft_passport` records everything known before the timed phase (identity and protocol) in
passport.draft.json, so a run killed on the way can still be recovered. `finalize` turns a draft
into the passport: every figure, count, canary summary, validity rule and the verdict come from
the run folder through `passport.audit.derive`, the function `passport verify` calls to check
them. `write_passport` writes report.md, report.html and plots, lists them in `files` with the
raw files, seals the passport with its content hash and writes passport.json last (atomically).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness import scrub_json, write_new
from passport.audit import (
    METRICS,
    RunState,
    content_sha256,
    derive,
    file_entries,
    sign_content,
)
from passport.model import (
    SCHEMA_VERSION,
    ClockInfo,
    HarnessInfo,
    MetricDefinition,
    Passport,
    PassportDraft,
    Protocol,
    ScheduleInfo,
    Signature,
    Validity,
    WorkloadInfo,
)
from passport.report import run_report_blocks, write_reports
from passport.run._accuracy import sets_protocol
from passport.run._plan import salt_of, shape_counts
from passport.run._stages import Identified, Opened, Planned, Prepared, in_stage

__all__ = ["DRAFT_FILE", "draft_passport", "write_draft", "finalize", "write_passport", "write_fallback",
           "fallback_folder", "cycle_note"]

DRAFT_FILE = "passport.draft.json"


def _workload_note(run: Opened, found: Identified, planned: Planned) -> str | None:
    """The tokenizer's note, and whether an open loop's arrivals repeat prompts (a short log)."""
    note = found.tokenizer_note
    schedule = planned.schedule
    if run.spec.load.open_loop and schedule.table.num_rows > schedule.pool_size:
        cycle = (f"the schedule's {schedule.table.num_rows} arrivals cycle the {schedule.pool_size} distinct "
                 "requests (a log shorter than the schedule): prompts repeat")
        note = f"{note}; {cycle}" if note else cycle
    return note


def cycle_note(note: str | None, pool_size: int, pool_cycles: int) -> str | None:
    """The workload note with a closed loop's cycling of its pool added (known after timing)."""
    if not pool_cycles:
        return note
    cycle = f"closed loop cycled the {pool_size}-request pool {pool_cycles} time(s): prompts repeat"
    return f"{note}; {cycle}" if note else cycle


def draft_passport(run: Opened, found: Identified, planned: Planned, prepared: Prepared, harness: HarnessInfo,
                   launched_engine: bool) -> PassportDraft:
    """Identity and protocol as they stand before the timed phase."""
    spec, request_set, schedule, suite = run.spec, planned.request_set, planned.schedule, run.suite
    protocol = Protocol(
        spec=scrub_json(run.raw_spec), effective=scrub_json(spec.model_dump(mode="json")),
        overrides=[o.model_copy(update={"value": scrub_json(o.value)}) for o in run.overrides],
        workload=WorkloadInfo(
            sha256=request_set.sha256, n_requests=len(request_set), seed=request_set.seed,
            tokenizer=request_set.tokenizer_source, tokenizer_sha256=request_set.tokenizer_sha256,
            exact_lengths=request_set.exact_lengths, note=_workload_note(run, found, planned),
            salt=salt_of(spec, run.run_id) or None, entries=len(planned.entries), shapes=shape_counts(request_set),
            structured_output_form=prepared.structured_output_form, tokenizer_check=prepared.tokenizer_check,
        ),
        schedule=ScheduleInfo(
            sha256=schedule.sha256, pattern=str(spec.load), n_scheduled=schedule.table.num_rows,
            n_warmup=schedule.n_warmup, window_s=None if schedule.window_ns is None else schedule.window_ns / 1e9,
            seed=spec.load.seed,
        ),
        harness=harness,
        clock=ClockInfo(clock="CLOCK_MONOTONIC (time.perf_counter_ns), ns since t0", t0_perf_counter_ns=planned.t0_ns,
                        t0_utc=planned.t0_utc),
        seeds={"workload": request_set.seed, "schedule": spec.load.seed, "sampling": spec.decoding.seed},
        request_params=prepared.params, max_tokens_is_target=planned.max_tokens_is_target,
        prefix_cache=prepared.prefix_cache,
        metric_definitions={
            m.id: MetricDefinition(version=m.version, unit=m.unit, definition=m.definition) for m in METRICS.values()
        },
        started_utc=run.started_utc, finished_utc=None, declared=planned.declared, telemetry=prepared.telemetry,
        workers=prepared.workers,
        canary_suite=None if suite is None else {
            "suite": suite.suite, "version": suite.version, "sha256": suite.sha256, "source": suite.source,
            "cases": [{"id": c.id, "version": c.version, "kind": c.kind, "sha256": c.sha256} for c in suite.cases],
            "share_under_load": spec.canary_share},
        accuracy_sets=None if spec.accuracy is None else sets_protocol(list(run.accuracy_sets), spec.accuracy),
    )
    return PassportDraft(run_id=run.run_id, name=spec.name, identity=dict(sorted(found.identity.items())),
                         protocol=protocol, forced=run.force, launched_engine=launched_engine)


def write_draft(folder: Path, draft: PassportDraft) -> None:
    write_new(folder / DRAFT_FILE, (draft.model_dump_json(indent=2) + "\n").encode())


def finalize(folder: Path, draft: PassportDraft, state: RunState, finished_utc: str,
             recovered: str | None = None) -> Passport:
    """The passport of a finished (or stopped) run; every derivable part comes from its folder.
    `recovered`: how `passport recover` came to write it, for a run that did not."""
    protocol = draft.protocol.model_copy(update={"finished_utc": finished_utc})
    derived = derive(folder, protocol.model_dump(mode="json"), state)
    validity = Validity(verdict=derived.verdict, complete=state.complete, incomplete_reason=state.incomplete_reason,
                        forced=derived.canaries["forced"], launched_engine=state.launched_engine, recovered=recovered,
                        canaries=derived.canaries, rules=derived.rules, counts=derived.counts)
    return Passport(
        schema_version=SCHEMA_VERSION, run_id=draft.run_id, name=draft.name, created_utc=finished_utc,
        verdict=derived.verdict, identity=draft.identity, protocol=protocol, validity=validity,
        results=derived.results, files=file_entries(folder),
    )


def write_passport(folder: Path, passport: Passport, reports: bool = True, to: Path | None = None) -> Passport:
    """Write the reports (unless `reports` is False), then passport.json listing them with the
    raw files and sealed with its content hash; returns the passport as written. `to`: write
    passport.json there instead (a fallback), keeping the folder's draft for `passport recover`."""
    if reports:
        with in_stage("writing the report and plots", folder, passes=(OSError,)):
            write_reports(folder, f"Passport: {passport.name}", run_report_blocks(passport, folder))
    sealed = passport.model_copy(update={"files": file_entries(folder, reports=reports), "content_sha256": None,
                                         "signature": None})
    sealed_hash = content_sha256(sealed.json_dict())
    with in_stage("signing the passport", folder, passes=(OSError,)):
        signature = Signature.model_validate(sign_content(sealed_hash))
    sealed = sealed.model_copy(update={"content_sha256": sealed_hash, "signature": signature})
    path = (to or folder) / "passport.json"
    write_new(path, (sealed.model_dump_json(indent=2) + "\n").encode())
    draft = folder / DRAFT_FILE
    if to is None and draft.is_file():
        draft.unlink()
    return sealed


def fallback_folder(folder: Path) -> Path:
    """Where the passport goes when its run folder takes no more writes: the system's temporary
    directory, under passport-fallback/<run folder name>/."""
    return Path(tempfile.gettempdir()) / "passport-fallback" / folder.name


def write_fallback(folder: Path, passport: Passport, error: OSError) -> tuple[Passport, Path]:
    """passport.json (without reports) in `fallback_folder`, saying why; raises OSError if even
    that cannot be written. Returns the passport and where it went."""
    target = fallback_folder(folder)
    target.mkdir(parents=True, exist_ok=True)
    why = (f"the passport could not be written to {folder} ({error.strerror or error}) and was written to "
           f"{target}; free space and run `passport recover {folder}` to write it beside its raw files")
    reason = passport.validity.incomplete_reason
    validity = passport.validity.model_copy(update={"incomplete_reason": f"{reason}; {why}" if reason else why})
    return write_passport(folder, passport.model_copy(update={"validity": validity}), reports=False, to=target), target
