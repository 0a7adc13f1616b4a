"""Assemble and write a run's passport.

`assemble_passport` builds the four parts: identity (collected), protocol (declared and
effective), results (recomputed from the Parquet files by `passport.audit`, never from memory),
validity (the auditor's rules over those results). `write_passport` writes `passport.json`,
`report.md` and `report.html`.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from passport.audit import (
    METRICS,
    CanaryFigures,
    RunFacts,
    ValidityLimits,
    compute_results,
    count_outcomes,
    evaluate,
    file_entries,
    load_table,
    offered_and_achieved_rates,
    verdict_of,
)
from passport.model import (
    SCHEMA_VERSION,
    ClockInfo,
    FileEntry,
    HarnessInfo,
    MetricDefinition,
    Passport,
    Protocol,
    Results,
    RuleResult,
    ScheduleInfo,
    SourcedValue,
    Validity,
    WorkloadInfo,
)
from passport.report import run_report_blocks, write_reports
from passport.run._canaries import canary_counts
from passport.run._plan import salt_of, shape_counts
from passport.run._stages import Gate, Identified, Opened, Planned, Timed
from workloads import RequestSet

__all__ = ["assemble_passport", "write_passport"]


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


def _workload_note(run: Opened, found: Identified, planned: Planned, timed: Timed) -> str | None:
    """The tokenizer's note, and whether prompts repeat (a cycled pool or a short log)."""
    note = found.tokenizer_note
    pool_cycles = max((r.pool_cycles for r in timed.repetitions), default=0)
    schedule = planned.schedule
    cycle_note = None
    if pool_cycles:
        cycle_note = f"closed loop cycled the {schedule.pool_size}-request pool {pool_cycles} time(s): prompts repeat"
    elif run.spec.load.open_loop and schedule.table.num_rows > schedule.pool_size:
        cycle_note = (f"the schedule's {schedule.table.num_rows} arrivals cycle the {schedule.pool_size} distinct "
                      "requests (a log shorter than the schedule): prompts repeat")
    if cycle_note:
        note = f"{note}; {cycle_note}" if note else cycle_note
    return note


def _protocol(run: Opened, found: Identified, planned: Planned, timed: Timed, harness: HarnessInfo,
              finished_utc: str) -> Protocol:
    spec, request_set, schedule = run.spec, planned.request_set, planned.schedule
    suite = run.suite
    return Protocol(
        spec=run.raw_spec,
        effective=spec.model_dump(mode="json"),
        overrides=run.overrides,
        workload=WorkloadInfo(
            sha256=request_set.sha256, n_requests=len(request_set), seed=request_set.seed,
            tokenizer=request_set.tokenizer_source, tokenizer_sha256=request_set.tokenizer_sha256,
            exact_lengths=request_set.exact_lengths, note=_workload_note(run, found, planned, timed),
            salt=salt_of(spec, run.run_id) or None, entries=len(planned.entries),
            shapes=shape_counts(request_set), structured_output_form=timed.structured_output_form,
            tokenizer_check=timed.tokenizer_check,
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
        request_params=timed.params,
        max_tokens_is_target=planned.max_tokens_is_target,
        prefix_cache=timed.prefix_cache,
        metric_definitions={
            m.id: MetricDefinition(version=m.version, unit=m.unit, definition=m.definition) for m in METRICS.values()
        },
        started_utc=run.started_utc,
        finished_utc=finished_utc,
        declared=planned.declared,
        telemetry=timed.telemetry,
        canary_suite=None if suite is None else {
            "suite": suite.suite, "version": suite.version, "sha256": suite.sha256, "source": suite.source,
            "cases": [{"id": c.id, "version": c.version, "kind": c.kind, "sha256": c.sha256} for c in suite.cases],
            "share_under_load": spec.canary_share},
    )


def assemble_passport(run: Opened, found: Identified, planned: Planned, gate: Gate, timed: Timed, *,
                      finished_utc: str, launched_engine: bool, harness: HarnessInfo) -> Passport:
    """The passport of a finished (or stopped) run; results come from the files in its folder."""
    folder, spec = run.folder, run.spec
    results = compute_results(folder)
    requests = load_table(folder, "requests")
    assert requests is not None
    discarded = [d["repetition"] for d in (results["discard"] or {"discarded": []})["discarded"]]
    counts = count_outcomes(requests, discarded)
    if gate.results is not None:
        counts.update(canary_counts(gate.results))
    complete = timed.stop_reason is None and len(timed.repetitions) == spec.load.repetitions
    offered, achieved = offered_and_achieved_rates(requests, discarded)
    capacity = found.identity.get("capacity.context_per_sequence")
    facts = RunFacts(
        complete=complete, incomplete_reason=timed.stop_reason or (None if complete else "not every repetition ran"),
        open_loop=spec.load.open_loop, launched_engine=launched_engine, git_dirty=harness.git_dirty,
        exact_lengths=planned.request_set.exact_lengths, canaries=cast(CanaryFigures, timed.canaries.model_dump()),
        forced=timed.canaries.forced, context_needed_tokens=_context_needed(planned.request_set),
        context_capacity_tokens=_int_value(capacity), capacity_source=_via(capacity),
        tokenizer_check=timed.tokenizer_check, offered_rate_per_s=offered, achieved_rate_per_s=achieved,
    )
    rules = evaluate(results, counts, facts, cast(ValidityLimits, spec.validity.model_dump()))
    verdict = verdict_of(rules, facts)
    validity = Validity(verdict=verdict, complete=complete, incomplete_reason=facts.incomplete_reason,
                        forced=timed.canaries.forced, canaries=timed.canaries,
                        rules=[RuleResult.model_validate(r) for r in rules], counts=counts)
    return Passport(
        schema_version=SCHEMA_VERSION, run_id=run.run_id, name=spec.name, created_utc=finished_utc, verdict=verdict,
        identity=dict(sorted(found.identity.items())), protocol=_protocol(run, found, planned, timed, harness,
                                                                          finished_utc),
        validity=validity, results=Results.model_validate(results),
        files={name: FileEntry.model_validate(entry) for name, entry in file_entries(folder).items()},
    )


def write_passport(folder: Path, passport: Passport) -> Path:
    """Write passport.json (atomically), report.md and report.html; returns the passport's path."""
    path = folder / "passport.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(passport.model_dump_json(indent=2) + "\n")
    tmp.replace(path)
    write_reports(folder, f"Passport: {passport.name}", run_report_blocks(passport, folder))
    return path
