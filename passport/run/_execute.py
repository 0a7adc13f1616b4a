"""`passport run`: the data flow of docs/concepts/design.md, from a validated spec to a written passport.

Stages, each a function with typed inputs and outputs (`_stages.py`):
open the run folder -> launch the engine (optional) -> identify (probe, identity, tokenizer) ->
plan (workload, schedule, declared.json) -> canaries (a failure: HOLD, no timed request, unless
forced) -> timed phase (or hold) -> assemble (results from the raw files, validity) -> write.
Library code: it raises our errors and reports progress through callbacks; only the CLI prints.
A bad spec never reaches here; an unreachable endpoint fails before anything is timed, and a run
folder that holds nothing is removed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from harness import (
    RAW_SCHEMA_VERSION,
    RAW_TABLES,
    EngineLauncher,
    HttpClient,
    PreparedRequest,
    open_new,
    real_dir,
    scrub_file,
    scrub_json,
    settle_open_writers,
    write_new,
)
from passport._errors import OutputFolderError
from passport._optional import require
from passport.audit import NO_CANARIES, SPEC_FILE, RunState, check_signing_key
from passport.model import Override, Passport, PassportDraft, RunSpec, TimingEnd, with_overrides
from passport.run._accuracy import AccuracyUnderLoad, load_declared_sets, run_alone, write_accuracy
from passport.run._assemble import (
    cycle_note,
    draft_passport,
    fallback_folder,
    finalize,
    write_draft,
    write_fallback,
    write_passport,
)
from passport.run._calibration import calibrate_run
from passport.run._canaries import UnderLoad, canary_info, load_declared_suite, run_canaries
from passport.run._collect import collect_harness, collect_host, collect_launcher
from passport.run._disk import check_room, make_run_folder, need_bytes
from passport.run._endpoint import access, auth_headers, engine_launcher, model_of
from passport.run._identity import complete_identity, probe_endpoint
from passport.run._interrupts import Interrupts
from passport.run._phase import TimedInputs
from passport.run._plan import (
    declare,
    plan_workload,
    request_params,
    resolve_tokenizer,
    salt_of,
    utc_now,
    write_schedule,
)
from passport.run._pool import build_pool
from passport.run._prefix_cache import apply_prefix_cache_policy, resolve_policy
from passport.run._ray import connect_ray
from passport.run._replay import write_probes
from passport.run._shards import join_leftover_parts
from passport.run._stages import Gate, Identified, Opened, Planned, Prepared, ProgressFactory, Say, Timed, in_stage
from passport.run._telemetry import choose_sources
from passport.run._timed import run_timed_phase
from passport.run._tokenize_check import N_CHECKED, texts_of, tokenizer_check
from passport.run._worker_count import resolve_workers
from workloads import entry_rows, load_tokenizer

__all__ = ["RunOutcome", "execute", "open_run", "identify", "plan", "gate_on_canaries", "prepare", "time_run"]


@dataclass(frozen=True)
class RunOutcome:
    """Where the run went and its passport (the CLI turns its verdict into an exit code);
    `interrupts`: Ctrl-C or SIGTERM received while the passport was being written; `fallback`:
    where passport.json went when the run folder took no more writes."""

    folder: Path
    passport: Passport
    interrupts: int = 0
    fallback: Path | None = None


def _silent(_message: str) -> None:
    return None


def write_spec_as_run(folder: Path, raw_spec: dict[str, Any], overrides: list[Override]) -> None:
    """spec.yaml: the spec as written with the command line's overrides applied (secrets
    scrubbed), so `passport run RUN/spec.yaml` offers the same run again. A sweep level's spec
    is one run: the sweep's own fields are left out."""
    ran = with_overrides(raw_spec, [o for o in overrides if o.field.split(".")[0] != "sweep"])
    write_new(folder / SPEC_FILE, yaml.safe_dump(scrub_json(ran), sort_keys=False, allow_unicode=True).encode())


def open_run(spec: RunSpec, raw_spec: dict[str, Any], overrides: list[Override], out_root: Path,
             force: bool) -> Opened:
    """Check what can be checked without the endpoint, then create the run folder (and prove it
    takes a write: an unusable --out is an input error before anything is sent). What the end of
    the run needs is checked here too, so it cannot fail after the timed phase: the signing key
    (read, or made on a first run) and the optional modules the spec names."""
    suite = load_declared_suite(spec.canaries, spec.endpoint.api) if spec.canaries != "none" else None
    accuracy_sets = tuple(load_declared_sets(spec.accuracy)) if spec.accuracy is not None else ()
    headers = auth_headers(spec)
    signing = check_signing_key()
    if spec.load.backend == "ray":
        require("ray", "load.backend: ray")
    run_id = uuid.uuid4().hex[:8]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(out_root) / f"{spec.name}-{stamp}-{run_id}"
    started_utc, run_start_ns = utc_now(), time.perf_counter_ns()
    make_run_folder(folder)
    write_spec_as_run(folder, raw_spec, overrides)
    return Opened(spec, raw_spec, overrides, folder, run_id, started_utc, run_start_ns, headers, suite, force, signing,
                  accuracy_sets)


def identify(run: Opened, launcher: EngineLauncher | None, say: Say) -> Identified:
    """Probe the endpoint, merge what the launcher and the spec say, load the tokenizer."""
    spec = run.spec
    way = access(spec, run.headers, launcher)
    base_url = way.base_url
    say(f"probing {base_url}")
    exchanges: list[dict[str, Any]] = []
    with way.control(record=exchanges) as control:
        cards = control.models()
        model_id = model_of(spec, cards, base_url)
        identity = probe_endpoint(control, cards, model_id, base_url, spec.endpoint.api)
    write_probes(run.folder, base_url, model_id, spec.endpoint.api, exchanges)
    engine_name = identity.get("engine.name")
    engine = str(engine_name.value) if engine_name else None
    tok_source, tok_note = resolve_tokenizer(spec, identity)
    say(f"loading tokenizer {tok_source}")
    tokenizer = load_tokenizer(tok_source)
    if launcher is not None and spec.engine is not None:
        model_path = os.path.expanduser(spec.engine.model_path) if spec.engine.model_path else None
        model_sha = tokenizer.sha256 if model_path and tok_source == f"gguf:{model_path}" else None
        identity.update(collect_launcher(launcher, model_path, model_sha))
    identity.update(collect_host())
    return Identified(base_url, model_id, engine, complete_identity(identity, spec.identity), tokenizer, tok_note, way)


def plan(run: Opened, found: Identified, say: Say) -> Planned:
    """Materialize and hash the offered load, write schedule.parquet and declared.json."""
    spec = run.spec
    say("materializing the workload and the schedule")
    schedule, request_set = plan_workload(spec, found.tokenizer)
    entries = entry_rows(request_set.table)
    check_room(run.folder, *need_bytes(schedule, request_set, entries, spec.load.repetitions,
                                       spec.record_text == "full"))
    n_offered = write_schedule(run.folder, schedule, request_set, entries, spec.record_text == "full")
    params, max_tokens_is_target = request_params(spec, found.engine)
    declared = declare(run.folder, spec, found.identity, request_set)
    return Planned(schedule, request_set, entries, n_offered, params, max_tokens_is_target, declared,
                   time.perf_counter_ns(), utc_now())


def gate_on_canaries(run: Opened, found: Identified, planned: Planned, say: Say) -> Gate:
    """Run the declared suite before any timing; a failure holds the run unless forced."""
    suite = run.suite
    if suite is None:
        return Gate(NO_CANARIES, None, True)
    say(f"canaries: suite {suite.suite!r}, {len(suite.cases)} cases, one at a time")
    results = run_canaries(suite, found.access, found.model_id, run.spec.endpoint.api, planned.t0_ns,
                           on_case=lambda r: say(f"  {r.verdict.upper():<4} {r.case_id}: {r.reason}"),
                           engine=found.engine)
    info = canary_info(suite, results, run.force, run.folder)
    proceed = info["status"] != "failed" or run.force
    if not proceed:
        say("canaries failed: HOLD, no timed request is sent (--force times the run anyway)")
    return Gate(info, results, proceed)


def score_alone(run: Opened, found: Identified, planned: Planned, gate: Gate, say: Say) -> Gate:
    """Every accuracy item, one at a time, before timing (kept in accuracy.parquet at once, so a
    run stopped later still has them)."""
    n_items = sum(len(s.items) for s in run.accuracy_sets)
    say(f"accuracy: {len(run.accuracy_sets)} sets, {n_items} items, one at a time")
    rows = run_alone(list(run.accuracy_sets), found.access, found.model_id, run.spec.endpoint.api, planned.t0_ns, say)
    write_accuracy(run.folder, rows)
    return replace(gate, accuracy_alone=tuple(rows))


@dataclass(frozen=True)
class _Ready:
    """A timed phase ready to start: what the passport records, the pool, its client, the
    telemetry sources (opened; the sampler closes them)."""

    prepared: Prepared
    pool: list[PreparedRequest]
    client: HttpClient
    sources: list[Any]


def prepare(run: Opened, found: Identified, planned: Planned, say: Say) -> _Ready:
    """Right before timing: the prefix-cache policy, telemetry sources, the request pool and the
    server's tokenizer check."""
    spec = run.spec
    params = dict(planned.params)
    with found.access.control() as control:
        prefix_cache = apply_prefix_cache_policy(spec, found.engine, control, run.run_id, params)
        sources, telemetry_info = choose_sources(spec, found.engine, control, found.access)
    say(f"prefix cache {prefix_cache['policy']}"
        + (f" ({prefix_cache['chosen']})" if spec.prefix_cache == "auto" else "") + f": {prefix_cache['method']}")
    say(requests_line(spec, params, planned.max_tokens_is_target))
    client = found.access.streams(max_idle=spec.load.streams)
    pool, structured_form = build_pool(spec, planned.request_set, client, found.model_id, found.engine, params,
                                       planned.max_tokens_is_target, salt_of(spec, run.run_id))
    check = None
    if planned.request_set.exact_lengths:
        with found.access.control() as control:
            table = planned.request_set.table
            bodies = table.column("body_json") if "body_json" in table.column_names else None
            first = [(int(e), texts_of(pool[int(e)].prompt, None if bodies is None else bodies[int(e)].as_py()),
                      pool[int(e)].input_tokens_client) for e in planned.entries[:N_CHECKED]]
            check = tokenizer_check(control, found.engine, found.model_id, first)
        say(f"tokenizer check: {check['agreed']} of {check['checked']} prompts counted alike by the server"
            if check["checked"] else f"tokenizer check: {check['note']}")
    workers = resolve_workers(spec, calibrate_run(run.folder, spec, say), say)
    return _Ready(Prepared(params, prefix_cache, telemetry_info, structured_form, check, workers), pool, client,
                  sources)


def requests_line(spec: RunSpec, params: dict[str, Any], max_tokens_is_target: bool) -> str:
    """What every request carries, defaults named as such, said before timing (a flag run's user
    never wrote them down)."""
    api = spec.endpoint.api
    default = "api" not in spec.endpoint.model_fields_set
    preset = spec.decoding.preset
    sampling = ", ".join(f"{k}={v}" for k, v in params.items() if k not in ("ignore_eos", "cache_prompt",
                                                                              "cache_salt")) or "the engine's own"
    named = (f" (preset {preset!r}, the default: --set decoding.preset=explicit sends none, "
             "--set decoding.temperature=0 is greedy)") if "preset" not in spec.decoding.model_fields_set \
        else f" (preset {preset!r})"
    line = (f"requests: {api} API" + (" (the default; --api completions sends the prompt as is)" if default else "")
            + f"; sampling {sampling}{named}"
            + f"; max_tokens is the {'output target (ignore_eos)' if max_tokens_is_target else 'cap'}")
    if api == "chat":
        line += ("; input lengths count the prompt text: the chat template adds tokens the server counts "
                 "(exact_input_lengths states how many)")
    return line


def _held(run: Opened, planned: Planned) -> Prepared:
    """No timed phase: empty raw tables (so the folder still verifies) and nothing applied."""
    policy, why = resolve_policy(run.spec)
    for name, schema in RAW_TABLES:
        with open_new(run.folder / f"{name}.parquet") as file:
            pq.write_table(schema.empty_table(), file)
    return Prepared(planned.params,
                    {"declared": run.spec.prefix_cache, "policy": policy, "chosen": why, "enforced": False,
                     "method": "not applied: no timed phase"},
                    {"interval_s": run.spec.telemetry.interval_s, "sources": [],
                     "notes": ["no timed phase: nothing was sampled"]})


def time_run(run: Opened, found: Identified, planned: Planned, gate: Gate, ready: _Ready,
             launcher: EngineLauncher | None, progress: ProgressFactory | None, say: Say) -> Timed:
    """The timed phase (and canaries sampled under load, whose cases join canaries.parquet)."""
    spec = run.spec
    total = None
    if spec.load.open_loop or spec.load.measure.requests is not None:
        total = planned.n_offered * spec.load.repetitions  # a session's turns count one by one
    workers = int((ready.prepared.workers or {}).get("count", 1))
    sink = progress(total, workers) if progress else None
    say(f"timed phase: {spec.load} x {spec.load.repetitions}"
        + (f", sent by {workers} worker processes" if workers > 1 else ""))
    under_load = None
    if run.suite is not None and spec.canary_share > 0:
        under_load = UnderLoad(run.suite, found.access.streams(max_idle=1), found.model_id, spec.endpoint.api,
                               planned.t0_ns, spec.canary_share, sink, found.engine)
    accuracy = None
    if spec.accuracy is not None and spec.accuracy.share > 0:
        accuracy = AccuracyUnderLoad(list(run.accuracy_sets), spec.accuracy, found.access.streams(max_idle=4),
                                     found.model_id, spec.endpoint.api, planned.t0_ns, total, spec.load.seed,
                                     under_load or sink)
    samplers = tuple(s for s in (accuracy, under_load) if s is not None)
    try:
        timed = run_timed_phase(TimedInputs(
            spec, ready.client, planned.schedule, ready.pool, planned.entries.tolist(), run.folder, planned.t0_ns,
            run.run_start_ns, found.tokenizer, launcher, sink, samplers, ready.sources,
            workers=workers, base_url=found.access.base_url))
    finally:  # what was answered stays, however the phase ended
        if accuracy is not None:
            write_accuracy(run.folder, [*gate.accuracy_alone, *accuracy.rows])
    if under_load is not None and run.suite is not None and gate.results is not None:
        canary_info(run.suite, gate.results, run.force, run.folder, under_load=under_load.results,
                    share=spec.canary_share)
    return Timed(timed.repetitions, timed.stop_reason, timed.workers)


def _stop_engine(launcher: EngineLauncher | None, owns_engine: bool) -> None:
    """Stop a launched engine this run owns, and mask any secret its log printed."""
    if launcher is not None and owns_engine:
        launcher.stop()
        scrub_file(launcher.log_path)


def execute(
    spec: RunSpec,
    raw_spec: dict[str, Any],
    overrides: list[Override],
    out_root: Path,
    progress: ProgressFactory | None = None,
    status: Say | None = None,
    shared_engine: EngineLauncher | None = None,
    force: bool = False,
) -> RunOutcome:
    """Run the spec end to end and write the run folder; see the module docstring.

    `shared_engine`: an already started launcher of `spec.engine` (a sweep's, shared by its levels);
    execute uses it and leaves it running. Otherwise execute launches `spec.engine`, if any, and
    stops it at the end. `force`: time the run even when the canaries fail (the passport says
    so); otherwise a failed canary means HOLD and no timed request. Once anything was timed, a
    further Ctrl-C or SIGTERM does not stop the passport of what was recorded from being written."""
    say = status or _silent
    run = open_run(spec, raw_spec, overrides, out_root, force)
    launcher = shared_engine
    owns_engine = shared_engine is None and spec.engine is not None
    harness = collect_harness(RAW_SCHEMA_VERSION)
    say(run.signing)
    try:
        if spec.load.backend == "ray":  # before anything is launched or sent
            with in_stage("connecting to Ray", run.folder):
                connect_ray(spec, say)
        if owns_engine:
            with in_stage("starting the engine", run.folder):
                launcher = engine_launcher(spec, run.folder / "engine.log")
                say(f"starting the engine: {' '.join(launcher.command)}")
                launcher.start()
        with in_stage("identifying the endpoint", run.folder):
            found = identify(run, launcher, say)
        with in_stage("planning the workload", run.folder):
            planned = plan(run, found, say)
        with in_stage("running the canaries", run.folder):
            gate = gate_on_canaries(run, found, planned, say)
        if gate.proceed and run.spec.accuracy is not None and run.spec.accuracy.alone:
            with in_stage("scoring accuracy alone", run.folder):
                gate = score_alone(run, found, planned, gate, say)
        with in_stage("preparing the timed phase", run.folder):
            if not gate.proceed:
                draft = draft_passport(run, found, planned, _held(run, planned), harness, launcher is not None)
                timed = Timed([], "no timed phase: the canaries failed (HOLD); see validity.canaries")
            else:
                ready = prepare(run, found, planned, say)
                draft = draft_passport(run, found, planned, ready.prepared, harness, launcher is not None)
            write_draft(run.folder, draft)
    except BaseException as exc:
        _stop_engine(launcher, owns_engine)
        # nothing was measured: a folder holding nothing but its spec, or only the probes of a run
        # refused for want of room, goes
        if run.folder.is_dir() and (isinstance(exc, OutputFolderError)
                                    or all(p.name == SPEC_FILE for p in run.folder.iterdir())):
            shutil.rmtree(run.folder)
        raise
    with Interrupts(say) as interrupts:
        if gate.proceed:
            with in_stage("running the timed phase", run.folder):
                timed = _timed_or_interrupted(run, found, planned, gate, ready, launcher, progress, say)
            interrupts.arm()
        with in_stage("writing the passport", run.folder, passes=()):
            outcome = _write_out(run, draft, timed, planned, launcher, owns_engine, interrupts.count)
    return outcome


def _write_out(run: Opened, draft: PassportDraft, timed: Timed, planned: Planned, launcher: EngineLauncher | None,
               owns_engine: bool, interrupts: int) -> RunOutcome:
    """After the timed phase: record how it ended in the draft (so a failure from here on is
    recovered with its real verdict), then derive, report, sign and write the passport."""
    spec = run.spec
    _stop_engine(launcher, owns_engine)
    complete = timed.stop_reason is None and len(timed.repetitions) == spec.load.repetitions
    state = RunState(complete=complete,
                     incomplete_reason=timed.stop_reason or (None if complete else "not every repetition ran"),
                     forced=run.force, launched_engine=launcher is not None)
    pool_cycles = max((r.pool_cycles for r in timed.repetitions), default=0)
    protocol = draft.protocol
    if timed.workers:
        protocol = protocol.model_copy(update={"workers": {**(protocol.workers or {}), **timed.workers}})
    note = cycle_note(protocol.workload.note, planned.schedule.pool_size, pool_cycles)
    protocol = protocol.model_copy(update={"workload": protocol.workload.model_copy(update={"note": note})})
    finished_utc = utc_now()
    draft = draft.model_copy(update={"protocol": protocol, "timing_end": TimingEnd(
        complete=state.complete, incomplete_reason=state.incomplete_reason, finished_utc=finished_utc)})
    if not (run.folder / "requests.parquet").is_file() and not (run.folder / "requests.parts").is_dir():
        return _folder_gone(run, draft, state, interrupts)
    with contextlib.suppress(OSError):  # a full disk keeps the first draft: recover then says INCOMPLETE
        write_draft(run.folder, draft)
    with in_stage("deriving the results and the verdict", run.folder, passes=()):
        passport = finalize(run.folder, draft, state, finished_utc)
    fallback = None
    try:
        passport = write_passport(run.folder, passport)
    except OSError as exc:
        passport, fallback = write_fallback(run.folder, passport, exc)
    return RunOutcome(run.folder, passport, interrupts, fallback)


def _folder_gone(run: Opened, draft: PassportDraft, state: RunState, interrupts: int) -> RunOutcome:
    """The run folder (or its raw tables) was deleted while the run went on: what it recorded is
    gone, but the run still ends in a passport saying so, written with empty raw tables to the
    fallback folder, like a run whose disk filled."""
    target = real_dir(fallback_folder(run.folder))
    for name, schema in RAW_TABLES:
        with open_new(target / f"{name}.parquet") as file:
            pq.write_table(schema.empty_table(), file)
    why = (f"the run folder {run.folder} (or its raw tables) was deleted during the run; the requests it recorded "
           f"went with it; this passport was written to {target}")
    state = RunState(complete=False, incomplete_reason=f"{state.incomplete_reason}; {why}" if state.incomplete_reason
                     else why, forced=state.forced, launched_engine=state.launched_engine)
    passport = write_passport(target, finalize(target, draft, state, utc_now()), reports=False)
    return RunOutcome(run.folder, passport, interrupts, target)


def _timed_or_interrupted(run: Opened, found: Identified, planned: Planned, gate: Gate, ready: _Ready,
                          launcher: EngineLauncher | None, progress: ProgressFactory | None, say: Say) -> Timed:
    """The timed phase; a signal that lands while its event loop is torn down (a second Ctrl-C:
    the writers may not all be closed) ends it as interrupted instead of losing the passport."""
    try:
        return time_run(run, found, planned, gate, ready, launcher, progress, say)
    except KeyboardInterrupt:
        settle_open_writers()
        join_leftover_parts(run.folder)
        return Timed([], "interrupted by SIGINT")
