"""`passport run`: the data flow of DESIGN.md, from a validated spec to a written passport.

Spec -> engine (optional launch) -> identity -> workload -> schedule -> declared.json (SLOs,
discard rules, realized capacity) -> canaries (a failure: HOLD, no timed request, unless
forced) -> timed run -> results from the raw files -> validity -> passport.json + reports.
Library code: it raises our errors and reports progress through a callback; only the CLI
prints. A bad spec never reaches here; an unreachable endpoint fails before anything is timed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import os
import shutil
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness import (
    CHUNKS_SCHEMA,
    RAW_SCHEMA_VERSION,
    REQUESTS_SCHEMA,
    TELEMETRY_SCHEMA,
    ClientMonitor,
    ControlClient,
    Endpoint,
    EndpointError,
    EngineLauncher,
    HttpClient,
    PreparedRequest,
    ProgressSink,
    RepetitionResult,
    ResponseExpectation,
    Runner,
    Schedule,
    SessionTurn,
    TableWriter,
    TelemetrySampler,
    Timeouts,
    build_body,
    build_schedule,
    structured_fields,
)
from passport._canary import UnderLoad, canary_counts, canary_info, load_declared_suite, run_canaries
from passport._errors import SpecError
from passport._identity import (
    collect_harness,
    collect_host,
    collect_launcher,
    sha256_file,
)
from passport._model import CanaryInfo, DeclaredInfo, Override, Passport, SourcedValue
from passport._passport import assemble_passport, write_passport
from passport._prefix_cache import apply_prefix_cache_policy
from passport._probe import complete_identity, probe_endpoint
from passport._spec import RunSpec
from passport._telemetry import choose_sources
from passport._tokenize_check import N_CHECKED, tokenizer_check
from passport.declared import DECLARED_FILE, write_declared
from workloads import LoadedTokenizer, RequestSet, data_url, entry_rows, load_tokenizer, materialize

__all__ = ["RunOutcome", "execute", "engine_launcher", "auth_headers", "model_of", "request_params",
           "resolve_tokenizer", "plan_workload", "ENGINES_WITH_IGNORE_EOS"]

_SWITCH_INTERVAL_S = 0.0005  # while timing: a worker thread yields the GIL to the loop within 0.5 ms
ENGINES_WITH_IGNORE_EOS = ("llama.cpp", "vllm", "sglang", "passport-simulator")
# Decoding presets, as model cards publish them (Qwen3-2507 Instruct: 0.7 / 0.8 / 20; thinking
# models: 1.0 / 0.95 / 20 with a presence penalty against repetition in long reasoning). Fields
# set in `decoding` replace the preset's; `explicit` sends only what is declared.
_PRESETS: dict[str, dict[str, Any]] = {
    "instruct": {"temperature": 0.7, "top_p": 0.8, "top_k": 20},
    "thinking": {"temperature": 1.0, "top_p": 0.95, "top_k": 20, "presence_penalty": 1.5},
    "explicit": {},
}
# Managed APIs speak OpenAI's parameters only: top_k is an open-engine extension they reject.
_OPENAI_ONLY = ("top_k",)


@dataclass(frozen=True)
class RunOutcome:
    """Where the run went and how it ended (exit code per DESIGN.md)."""

    folder: Path
    passport: Passport
    exit_code: int


ProgressFactory = Callable[[int | None], ProgressSink]


def request_params(spec: RunSpec, engine: str | None) -> tuple[dict[str, Any], bool]:
    """(body fields sent with every request, whether max_tokens is the output *target*)."""
    d = spec.decoding
    params = dict(_PRESETS[d.preset])
    if engine is not None and engine.startswith("managed:"):
        params = {k: v for k, v in params.items() if k not in _OPENAI_ONLY}
    for key in ("temperature", "top_p", "top_k", "presence_penalty", "seed"):
        value = getattr(d, key)
        if value is not None:
            params[key] = value
    ignore_eos = engine in ENGINES_WITH_IGNORE_EOS if d.ignore_eos == "auto" else bool(d.ignore_eos)
    if ignore_eos:
        params["ignore_eos"] = True
    params.update(d.extra)
    return params, ignore_eos


def _utc(ts: float | None = None) -> str:
    return dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def resolve_tokenizer(spec: RunSpec, identity: dict[str, SourcedValue]) -> tuple[str, str | None]:
    """(tokenizer source, note) for `workload.tokenizer`, resolving `auto`."""
    declared = spec.workload.tokenizer
    if declared != "auto":
        return declared, None
    if spec.engine and spec.engine.model_path and spec.engine.model_path.endswith(".gguf"):
        return f"gguf:{os.path.expanduser(spec.engine.model_path)}", "auto: the launched model's GGUF"
    probed = identity.get("model.root")
    if probed and isinstance(probed.value, str) and probed.value.endswith(".gguf") and os.path.isfile(probed.value):
        return f"gguf:{probed.value}", "auto: the GGUF the server reports in /props"
    return "none", "auto: no local tokenizer found for this model; lengths are approximate"


def _salt(spec: RunSpec, run_id: str) -> str:
    """The marker that starts every shared prefix (see workloads.SharedPrefixSpec), or ""."""
    shared = spec.workload.shared_prefix
    if shared is None or shared.salt == "none":
        return ""
    return f"[run {run_id}]" if shared.salt == "per_run" else shared.salt


def plan_workload(spec: RunSpec, tokenizer: LoadedTokenizer) -> tuple[Schedule, RequestSet]:
    """The schedule and the request set a run offers. Trace replay takes every record of the
    imported log and schedules them at its recorded times; other patterns size the set to the
    schedule's pool (a log with fewer records is cycled in order; the passport notes it). The
    schedule's `request_index` counts entries (requests, or sessions' first turns: see
    `workloads.entry_rows`)."""
    if spec.load.pattern == "trace":
        request_set = materialize(spec.workload, None, tokenizer, seed=spec.load.seed)
        names = request_set.table.column_names
        stamps = (np.asarray(request_set.table.column("timestamp_s").to_numpy(zero_copy_only=False), dtype=float)
                  if "timestamp_s" in names else None)
        return build_schedule(spec.load, None, timestamps_s=stamps), request_set
    schedule = build_schedule(spec.load, spec.workload.requests)
    request_set = materialize(spec.workload, schedule.pool_size, tokenizer, seed=spec.load.seed)
    n_entries = len(entry_rows(request_set.table))
    if n_entries < schedule.pool_size:  # an imported log shorter than the schedule: cycled in order
        schedule = build_schedule(spec.load, n_entries)
    return schedule, request_set


def _declare(folder: Path, spec: RunSpec, identity: dict[str, SourcedValue]) -> DeclaredInfo:
    """Freeze the effective spec and the realized per-sequence context into declared.json."""
    probed = identity.get("capacity.context_per_sequence")
    capacity = probed.value if probed is not None and isinstance(probed.value, int) else None
    source = f"{probed.source} ({probed.via})" if capacity is not None and probed is not None else None
    sha, written_utc = write_declared(folder, spec.model_dump(mode="json"), capacity, source)
    return DeclaredInfo(file=DECLARED_FILE, sha256=sha, written_utc=written_utc,
                        context_tokens_per_sequence=capacity, capacity_source=source)


_SCHEDULE_EXTRAS = ("shape", "prefix_group", "session", "turn", "think_time_s", "images_json")


def _write_schedule(folder: Path, schedule: Schedule, request_set: RequestSet, entries: np.ndarray,
                    full_text: bool) -> int:
    """schedule.parquet: every scheduled entry with its workload fields; a session's later turns
    follow its first, with the session's seq and phase and no intended time (they are sent when
    the previous answer is in). `request_index` is the row of the request set. Returns the
    number of requests it lists."""
    wl = request_set.table
    scheduled = schedule.table.column("request_index").to_numpy()
    first = entries[scheduled]
    lengths = (np.append(entries[1:], wl.num_rows) - entries)[scheduled]  # rows of each entry
    position = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)  # turn in entry
    rows = np.repeat(first, lengths) + position
    is_first = position == 0
    base = schedule.table.take(pa.array(np.repeat(np.arange(len(first)), lengths)))
    offsets = pc.if_else(pa.array(is_first), base.column("intended_offset_ns"), pa.scalar(None, pa.int64()))
    table = pa.table({
        "seq": base.column("seq"), "phase": base.column("phase"),
        "intended_offset_ns": offsets,
        "request_index": pa.array(rows, pa.int64()),
    })
    take = pa.array(rows, pa.int64())
    names = ["input_tokens_target", "input_tokens_client", "output_tokens_target"] + [
        n for n in _SCHEDULE_EXTRAS if n in wl.column_names]
    for name in names:
        table = table.append_column(name, wl.column(name).take(take))
    prompts = wl.column("prompt").take(take)
    table = table.append_column("prompt", prompts if full_text else pa.nulls(len(prompts), pa.string()))
    if "body_json" in wl.column_names and full_text:
        table = table.append_column("body_json", wl.column("body_json").take(take))
    pq.write_table(table, folder / "schedule.parquet", compression="zstd")
    return int(table.num_rows)


def _shape_counts(request_set: RequestSet) -> dict[str, int] | None:
    """Requests of the set per shape (None for a plain workload without the column)."""
    if "shape" not in request_set.table.column_names:
        return None
    return dict(sorted(Counter(str(x) for x in request_set.table.column("shape").to_pylist()).items()))


def _user_content(prompt: str, images_json: str | None) -> str | list[dict[str, Any]]:
    """The user message's content: the text, or text and images (PNG data URLs) as parts."""
    if not images_json:
        return prompt
    parts: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
    for width, height, seed in orjson.loads(images_json):
        parts.append({"type": "image_url", "image_url": {"url": data_url(int(width), int(height), int(seed))}})
    return parts


def _expectation(body: dict[str, Any]) -> ResponseExpectation | None:
    """What a request's body asks of the answer, for the after-the-fact check."""
    form = body.get("response_format")
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return ResponseExpectation("json_schema", schema=(form.get("json_schema") or {}).get("schema") or {})
    if isinstance(form, dict) and form.get("type") == "json_object":  # any JSON object will do
        return ResponseExpectation("json_schema", schema={"type": "object"})
    if body.get("tools") and body.get("tool_choice") != "none":
        choice = body.get("tool_choice")
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        return ResponseExpectation("tool_call", tools=list(body["tools"]), tool=named)
    return None


def build_pool(spec: RunSpec, request_set: RequestSet, client: HttpClient, model_id: str, engine: str | None,
               params: dict[str, Any], max_tokens_is_target: bool,
               salt: str) -> tuple[list[PreparedRequest], str | None]:
    """Every request of the set, prepared: (pool, the structured-output form used or None).

    Structured-output and tool requests are sent without `ignore_eos` (the answer must be free to
    end) and their max_tokens is a cap; their answers are checked after the fact."""
    api = spec.endpoint.api
    path = "/chat/completions" if api == "chat" else "/completions"
    wl = request_set.table.to_pydict()
    n = len(wl["prompt"])
    none: list[Any] = [None] * n
    bodies, groups = wl.get("body_json") or none, wl.get("prefix_group")
    images, sessions, turns = wl.get("images_json") or none, wl.get("session") or none, wl.get("turn") or none
    thinks, shapes = wl.get("think_time_s") or none, wl.get("shape") or none
    form_used: str | None = None
    session_turns = Counter(x for x in sessions if x is not None)
    free_params = {k: v for k, v in params.items() if k != "ignore_eos"}
    pool: list[PreparedRequest] = []
    for i in range(n):
        prompt = wl["prompt"][i]
        if salt and (groups is None or groups[i] is not None):
            prompt = f"{salt} {prompt}"
        body = orjson.loads(bodies[i]) if bodies[i] else {}
        expect = _expectation(body)
        if expect is not None and (body.get("response_format") or {}).get("type") == "json_schema":
            fields, form_used = structured_fields(expect.schema or {}, engine, api)
            body = {k: v for k, v in body.items() if k != "response_format"} | fields
        sent_params = free_params if expect is not None else params
        is_target = max_tokens_is_target and expect is None
        out = wl["output_tokens_target"][i]
        message = {"role": "user", "content": _user_content(prompt, images[i])}
        if images[i] or sessions[i] is not None:
            body["messages"] = [message]
        turn = None
        if sessions[i] is not None:
            last = i + 1 >= n or sessions[i + 1] != sessions[i]

            def build(history: list[dict[str, Any]], body: dict[str, Any] = body, message: dict[str, Any] = message,
                      prompt: str = prompt, out: int = out, sent: dict[str, Any] = sent_params) -> bytes:
                return client.request_bytes(path, build_body(api, model_id, prompt, out, sent,
                                                              body | {"messages": history + [message]}))
            turn = SessionTurn(session=int(sessions[i]), turn=int(turns[i]), turns=session_turns[sessions[i]],
                               next_index=-1 if last else i + 1,
                               think_ns=int(round((thinks[i] or 0.0) * 1e9)), message=message, build=build)
        later_turn = turn is not None and turn.turn > 0  # its bytes are built from the answers, at send time
        pool.append(PreparedRequest(
            request=b"" if later_turn else client.request_bytes(
                path, build_body(api, model_id, prompt, out, sent_params, body or None)),
            prompt=prompt, max_tokens=out, max_tokens_is_target=is_target,
            input_tokens_target=wl["input_tokens_target"][i], input_tokens_client=wl["input_tokens_client"][i],
            output_tokens_target=out, shape=shapes[i], expect=expect, turn=turn))
    return pool, form_used


async def _timed_phase(
    spec: RunSpec,
    client: HttpClient,
    schedule: Schedule,
    pool: list[PreparedRequest],
    folder: Path,
    t0_ns: int,
    launcher: EngineLauncher | None,
    tokenizer: LoadedTokenizer,
    progress: ProgressSink | None,
    run_start_ns: int,
    under_load: UnderLoad | None,
    telemetry_sources: list[Any],
    entries: list[int],
) -> tuple[list[RepetitionResult], str | None]:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    reason: list[str] = []

    def interrupt(name: str) -> None:
        reason.append(f"interrupted by {name}")
        stop.set()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, interrupt, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    concurrency = spec.load.concurrency or 64
    endpoint = client.endpoint
    requests_w = TableWriter(folder, "requests", REQUESTS_SCHEMA, flush_rows=256)
    chunks_w = TableWriter(folder, "chunks", CHUNKS_SCHEMA, flush_rows=8192)
    telemetry_w = TableWriter(folder, "telemetry", TELEMETRY_SCHEMA, flush_rows=1024, flush_s=5.0)
    count = tokenizer.tokenizer.encode if tokenizer.exact else None
    runner = Runner(client, spec.endpoint.api, spec.load, schedule, pool, requests_w, chunks_w, t0_ns, stop,
                    record_text=spec.record_text, count_tokens=(lambda s: len(count(s))) if count else None,
                    progress=under_load if under_load is not None else progress, entries=entries)

    engine_exit_seen: list[bool] = []

    def note_engine_exit() -> None:
        """Record the launched engine's exit once, as the first reason the run stopped."""
        assert launcher is not None
        if engine_exit_seen:
            return
        engine_exit_seen.append(True)
        code = launcher.exit_code if launcher.exit_code is not None else launcher.returncode
        telemetry_w.append_row({"t_ns": time.perf_counter_ns() - t0_ns, "source": "engine", "name": "exit",
                                "value": float(code if code is not None else -1)})
        reason.insert(0, f"the launched engine exited (code {code}); see engine.log")
        stop.set()

    def record_rss() -> None:
        assert launcher is not None
        for t_ns, rss in launcher.drain_samples():
            if t_ns >= run_start_ns:  # a shared (sweep) engine was also sampled before this run
                telemetry_w.append_row({"t_ns": t_ns - t0_ns, "source": "engine", "name": "rss_bytes",
                                        "value": rss})

    async def watch_engine() -> None:
        assert launcher is not None
        telemetry_w.append_row({"t_ns": time.perf_counter_ns() - t0_ns, "source": "engine", "name": "launched",
                                "value": 1.0})
        while True:
            record_rss()
            if not launcher.alive():
                note_engine_exit()
                return
            await asyncio.sleep(0.5)

    background = [loop.create_task(ClientMonitor(telemetry_w, t0_ns).run())]
    if telemetry_sources:
        sampler_task = TelemetrySampler(telemetry_sources, telemetry_w, t0_ns, spec.telemetry.interval_s).run()
        background.append(loop.create_task(sampler_task))
    if launcher is not None:
        background.append(loop.create_task(watch_engine()))
    canaries_done = asyncio.Event()
    sampler = loop.create_task(under_load.run(canaries_done)) if under_load is not None else None
    # A full (oldest-generation) garbage collection walks every object the run holds and stalls
    # the event loop for tens of ms (measured: 58-73 ms at 50 req/s, delaying sends by as much;
    # benchmarks/trace_replay.py). While timing, young generations are still collected but the
    # oldest is not; what existed before is frozen out of every collection. Restored after.
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(thresholds[0], thresholds[1], 1_000_000)
    # Worker threads (Parquet parts, telemetry scrapes) hold the GIL while they run Python code;
    # the loop waits for it up to the switch interval (5 ms by default), a send delayed as much.
    switch_interval_s = sys.getswitchinterval()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    try:
        await client.start()
        try:
            await client.preconnect(min(concurrency, 64))
        except (OSError, TimeoutError) as exc:
            raise EndpointError(f"cannot open connections to {endpoint.host}:{endpoint.port}: {exc}") from exc
        results = await runner.run()
        if runner.abort_reason:
            reason.append(runner.abort_reason)
    finally:
        canaries_done.set()
        if sampler is not None:  # let a case in flight finish, within reason
            try:
                await asyncio.wait_for(sampler, timeout=30)
            except (TimeoutError, asyncio.CancelledError):
                pass
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        if launcher is not None:
            if not launcher.alive():
                note_engine_exit()
            record_rss()
        await client.aclose()
        for sig in installed:
            loop.remove_signal_handler(sig)
        for writer in (requests_w, chunks_w, telemetry_w):
            writer.close()
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        sys.setswitchinterval(switch_interval_s)
    return results, (reason[0] if reason else None)


def auth_headers(spec: RunSpec) -> dict[str, str]:
    """The Authorization header from `endpoint.api_key_env` (the key itself is never stored)."""
    if not spec.endpoint.api_key_env:
        return {}
    key = os.environ.get(spec.endpoint.api_key_env)
    if not key:
        raise SpecError(f"endpoint.api_key_env names {spec.endpoint.api_key_env!r}, which is not set; "
                        f"export {spec.endpoint.api_key_env}=<your key> and run again")
    return {"Authorization": f"Bearer {key}"}


def model_of(spec: RunSpec, cards: list[dict[str, Any]], base_url: str) -> str:
    """endpoint.model, or with `auto` the first id the endpoint's /models lists."""
    if spec.endpoint.model != "auto":
        return spec.endpoint.model
    if not cards:
        raise EndpointError(f"{base_url}/models lists no model; set endpoint.model explicitly")
    return str(cards[0].get("id"))


def engine_launcher(spec: RunSpec, log_path: Path) -> EngineLauncher:
    """A launcher (not yet started) for `spec.engine`, on the port of endpoint.base_url if given."""
    assert spec.engine is not None
    port = spec.engine.port
    if port is None and spec.endpoint.base_url:
        port = Endpoint.parse(spec.endpoint.base_url).port
    return EngineLauncher(spec.engine.launch, log_path, spec.engine.model_path, port=port,
                          health_timeout_s=spec.engine.health_timeout_s)


class _Hold(Exception):
    """The canaries failed: skip the timed phase and write a HOLD passport."""


def _run_loop(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def execute(
    spec: RunSpec,
    raw_spec: dict[str, Any],
    overrides: list[Override],
    out_root: Path,
    progress: ProgressFactory | None = None,
    status: Callable[[str], None] | None = None,
    shared_engine: EngineLauncher | None = None,
    force: bool = False,
) -> RunOutcome:
    """Run the spec end to end and write the run folder; see the module docstring.

    `shared_engine`: an already started launcher of `spec.engine` (a sweep's, shared by its levels);
    execute uses it and leaves it running. Otherwise execute launches `spec.engine`, if any, and
    stops it at the end. `force`: time the run even when the canaries fail (the passport says
    so); otherwise a failed canary means HOLD and no timed request."""
    say = status or (lambda _msg: None)
    suite = load_declared_suite(spec.canaries) if spec.canaries != "none" else None
    started_utc = _utc()
    run_start_ns = time.perf_counter_ns()
    run_id = uuid.uuid4().hex[:8]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(out_root) / f"{spec.name}-{stamp}-{run_id}"
    folder.mkdir(parents=True, exist_ok=False)
    try:
        headers = auth_headers(spec)
    except SpecError:
        shutil.rmtree(folder)
        raise
    launcher: EngineLauncher | None = shared_engine
    owns_engine = shared_engine is None
    nothing_useful = True
    try:
        identity: dict[str, SourcedValue] = {}
        model_sha: str | None = None
        if launcher is None and spec.engine is not None:
            launcher = engine_launcher(spec, folder / "engine.log")
            nothing_useful = False
            say(f"starting the engine: {' '.join(launcher.command)}")
            launcher.start()
        base_url = spec.endpoint.base_url or (launcher.base_url if launcher else None)
        assert base_url is not None
        endpoint = Endpoint.parse(base_url)
        say(f"probing {base_url}")
        with ControlClient(base_url, headers, ca_file=spec.endpoint.ca_file) as control:
            cards = control.models()
            model_id = model_of(spec, cards, base_url)
            identity.update(probe_endpoint(control, cards, model_id, base_url, spec.endpoint.api))
        engine_name = identity.get("engine.name")
        engine = str(engine_name.value) if engine_name else None
        tok_source, tok_note = resolve_tokenizer(spec, identity)
        say(f"loading tokenizer {tok_source}")
        tokenizer = load_tokenizer(tok_source)
        if launcher is not None and spec.engine is not None:
            model_path = os.path.expanduser(spec.engine.model_path) if spec.engine.model_path else None
            if model_path and tok_source == f"gguf:{model_path}":
                model_sha = tokenizer.sha256
            elif model_path and os.path.isfile(model_path):
                model_sha = sha256_file(Path(model_path))
            identity.update(collect_launcher(launcher, model_path, model_sha))
        identity.update(collect_host())
        identity = complete_identity(identity, spec.identity)

        say("materializing the workload and the schedule")
        schedule, request_set = plan_workload(spec, tokenizer)
        entries = entry_rows(request_set.table)
        workload_extra: dict[str, Any] = {"entries": len(entries), "shapes": _shape_counts(request_set)}
        nothing_useful = False
        full_text = spec.record_text == "full"
        n_offered = _write_schedule(folder, schedule, request_set, entries, full_text)
        params, max_tokens_is_target = request_params(spec, engine)
        t = spec.timeouts
        timeouts = Timeouts(t.connect_s, t.first_byte_s, t.stall_s, t.total_s)
        client = HttpClient(endpoint, timeouts,
                            max_idle=spec.load.concurrency or 64, extra_headers=headers,
                            ca_file=spec.endpoint.ca_file)
        declared = _declare(folder, spec, identity)
        t0_ns = time.perf_counter_ns()
        t0_utc = _utc()
        prefix_cache: dict[str, Any] = {"declared": spec.prefix_cache, "enforced": False,
                                        "method": "not applied: no timed phase"}
        telemetry_info: dict[str, Any] = {"interval_s": spec.telemetry.interval_s, "sources": [],
                                          "notes": ["no timed phase: nothing was sampled"]}
        canaries = CanaryInfo(status="not_run", suite="none", reason="the spec declares canaries: none")
        canary_results = None
        if suite is not None:
            say(f"canaries: suite {suite.suite!r}, {len(suite.cases)} cases, one at a time")
            canary_results = run_canaries(suite, base_url, headers, spec.endpoint.ca_file, timeouts, model_id,
                                          spec.endpoint.api, t0_ns,
                                          on_case=lambda r: say(f"  {r.verdict.upper():<4} {r.case_id}: {r.reason}"),
                                          engine=engine)
            canaries = canary_info(suite, canary_results, force, folder)
        if canaries.status == "failed" and not force:
            say("canaries failed: HOLD, no timed request is sent (--force times the run anyway)")
            for name, schema in (("requests", REQUESTS_SCHEMA), ("chunks", CHUNKS_SCHEMA),
                                 ("telemetry", TELEMETRY_SCHEMA)):
                pq.write_table(schema.empty_table(), folder / f"{name}.parquet")
            repetitions: list[RepetitionResult] = []
            stop_reason: str | None = "no timed phase: the canaries failed (HOLD); see validity.canaries"
            raise _Hold
        with ControlClient(base_url, headers, ca_file=spec.endpoint.ca_file) as control:
            prefix_cache = apply_prefix_cache_policy(spec.prefix_cache, engine, control, run_id, params)
            # opened only for a run that will be timed: the sampler closes them when it ends
            telemetry_sources, telemetry_info = choose_sources(spec, engine, control, headers)
        say(f"prefix cache {spec.prefix_cache}: {prefix_cache['method']}")
        pool, structured_form = build_pool(spec, request_set, client, model_id, engine, params,
                                           max_tokens_is_target, _salt(spec, run_id))
        workload_extra["structured_output_form"] = structured_form
        if request_set.exact_lengths:
            with ControlClient(base_url, headers, ca_file=spec.endpoint.ca_file) as control:
                first = [(int(entries[k]), p.prompt, p.input_tokens_client)
                         for k, p in enumerate(pool[int(e)] for e in entries[:N_CHECKED])]
                workload_extra["tokenizer_check"] = tokenizer_check(control, engine, model_id, first)
            check = workload_extra["tokenizer_check"]
            say(f"tokenizer check: {check['agreed']} of {check['checked']} prompts counted alike by the server"
                if check["checked"] else f"tokenizer check: {check['note']}")
        total = None
        if spec.load.open_loop or spec.load.measure.requests is not None:
            total = n_offered * spec.load.repetitions  # a session's turns count one by one
        sink = progress(total) if progress else None
        say(f"timed phase: {spec.load} x {spec.load.repetitions}")
        under_load = None
        if suite is not None and spec.canary_share > 0:
            under_load = UnderLoad(suite, HttpClient(endpoint, timeouts, max_idle=1, extra_headers=headers,
                                                     ca_file=spec.endpoint.ca_file),
                                   model_id, spec.endpoint.api, t0_ns, spec.canary_share, sink, engine)
        repetitions, stop_reason = _run_loop(_timed_phase(
            spec, client, schedule, pool, folder, t0_ns, launcher, tokenizer, sink, run_start_ns, under_load,
            telemetry_sources, entries.tolist()))
        if under_load is not None and suite is not None and canary_results is not None:
            canaries = canary_info(suite, canary_results, force, folder, under_load=under_load.results,
                                   share=spec.canary_share)
    except _Hold:
        pass
    except BaseException:
        if launcher is not None and owns_engine:
            launcher.stop()
        if nothing_useful and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise
    if launcher is not None and owns_engine:
        launcher.stop()
    finished_utc = _utc()
    passport = assemble_passport(
        folder=folder, run_id=run_id, spec=spec, raw_spec=raw_spec, overrides=overrides, identity=identity,
        request_set=request_set, tokenizer_note=tok_note, schedule=schedule, params=params,
        max_tokens_is_target=max_tokens_is_target, t0_ns=t0_ns, t0_utc=t0_utc, started_utc=started_utc,
        finished_utc=finished_utc, repetitions=repetitions, stop_reason=stop_reason, canaries=canaries,
        launched_engine=launcher is not None, harness=collect_harness(RAW_SCHEMA_VERSION), declared=declared,
        canary_counts=canary_counts(canary_results) if canary_results is not None else None,
        telemetry=telemetry_info, prefix_cache=prefix_cache, salt=_salt(spec, run_id) or None,
        workload_extra=workload_extra,
        canary_suite=None if suite is None else {
            "suite": suite.suite, "version": suite.version, "sha256": suite.sha256, "source": suite.source,
            "cases": [{"id": c.id, "version": c.version, "kind": c.kind, "sha256": c.sha256} for c in suite.cases],
            "share_under_load": spec.canary_share},
    )
    write_passport(folder, passport)
    return RunOutcome(folder, passport, 0 if passport.verdict == "VALID" else 1)
