"""What this client can pace on this machine: the CPU cost of the timed phase's own pipeline,
measured once per machine and harness and cached, then written into every run folder.

The measurement runs the harness's `Runner` with the run's own raw writers (requests and chunks
Parquet, written in their thread) and the pacer, on the event loop a run uses, against the
simulated engine (zero compute, in its own process): constant-rate open loops of one-token
streams at two rates and of 32-token streams spaced 1 ms apart (each chunk its own read, as a
real engine sends them) at the first rate. Each gives the process's CPU share over the loop (CPU
time of every thread, loop, pacer and writers, over wall time) at known requests/s and chunks/s;
`fit_cost` solves share = `fixed_cpu_share` + requests/s x `cpu_us_per_request` + chunks/s x
`cpu_us_per_chunk`. The fixed share is not an idle cost: the cost per request falls as the rate
rises (more work per wake-up of the loop), and a line with an intercept follows that near the
ceiling where a line through zero would not. CPU time, not wall time: another process on the
machine slows the loop but adds little to what the pipeline itself costs, so a calibration on a
busy machine stays near one on an idle one (each point keeps its run-queue wait, for the reader).

The ceiling. benchmarks/roofline.py measures the highest rate one worker paces with dispatch lag
p99 <= 1 ms against a zero-compute server, and the CPU share of one core it used there: past
about `PACING_CPU_SHARE` the loop's stalls outgrow the pacer's arming horizon and sends go late
(`PACING_CPU_SHARE_REALTIME` where the calibration's own pacer was the real-time C thread, which
holds until the core is nearly full).
So the ceiling at a run's mix is `(PACING_CPU_SHARE - fixed_cpu_share) / (cpu_us_per_request +
chunks per request x cpu_us_per_chunk)` requests/s per worker. `results.client.headroom` (passport.audit) divides it
by what the run sent; `load.workers: auto` divides what the load will offer by it.

Cached under `$PASSPORT_CACHE/calibration/client-<key>.json`, the key hashing what the cost
depends on (the harness's source, Python, uvloop, the CPU model and the cores this process may
use), for `_MAX_AGE_S`; `passport calibrate --fresh` measures again. Limits: measured on this
host only (a Ray run's remote workers are assumed alike), and a model of CPU cost, not of every
stall: the roofline benchmark prints the prediction beside its measured ceiling.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from harness import (
    Endpoint,
    HarnessError,
    HttpClient,
    LoadSpec,
    PreparedRequest,
    Runner,
    Timeouts,
    build_schedule,
    run_delay_ns,
)
from harness.simulator import spawn
from passport.audit import CALIBRATION_FILE, ceiling_requests_per_s
from passport.model import RunSpec
from passport.run._phase import quiet_interpreter, raw_writers, run_loop
from passport.run._plan import utc_now
from passport.run._stages import Say
from workloads import default_cache_dir

__all__ = ["ClientCalibration", "client_calibration", "PACING_CPU_SHARE", "PACING_CPU_SHARE_REALTIME", "calibrate_run",
           "fit_cost", "expected_chunks_per_request"]

# Of one core: where benchmarks/roofline.py's dispatch lag p99 reached 1 ms (one-token streams,
# the CPU share measured at its ceiling). With the pacer's Python thread: 0.34 at 500/s on
# 2026-12-04's machine, 0.31 at 1,000/s on an earlier one; with its C thread under SCHED_FIFO,
# which no GIL holder delays: 0.92 at 4,000/s on 2026-12-05's (lag p99 0.17 ms; 0.99 at 6,000/s:
# 6.2 ms), the loop itself the limit.
PACING_CPU_SHARE = 0.35
PACING_CPU_SHARE_REALTIME = 0.9
CALIBRATION_VERSION = 3  # 3: the pacing share follows the pacer's thread (points carry pacer_realtime)
_MAX_AGE_S = 7 * 86400
# (output tokens, rate per second, requests), about a second each, within what the simulator (one
# Python process) serves without falling behind on a 2-core machine: two rates of one-token
# streams (the per-request cost, and what is left at no rate) and 32-token streams at the first
# rate (the per-chunk cost, from the difference at the same request rate). A short first pass,
# not counted, pays what the process's first timed phase costs once (imports, first writes).
_SHAPES = ((1, 200.0, 200), (1, 600.0, 600), (32, 200.0, 200))
_FIRST = (1, 200.0, 60)
_WARMUP_REQUESTS = 16
# Streamed events per answer beyond its tokens: the role chunk, the usage chunk, [DONE].
_EXTRA_CHUNKS = 2.0


@dataclass(frozen=True)
class ClientCalibration:
    """CPU microseconds of this client per request and per streamed chunk, the CPU share at which
    its pacing holds, and where they came from (`how`: measured now, or read from the cache)."""

    cpu_us_per_request: float
    cpu_us_per_chunk: float
    pacing_cpu_share: float
    measured_utc: str
    key: str
    how: str
    points: list[dict[str, float]]  # each shape as measured: chunks per request, us per request, ...
    fixed_cpu_share: float = 0.0  # what the pipeline costs per second whatever the rate
    version: int = CALIBRATION_VERSION

    def ceiling_requests_per_s(self, chunks_per_request: float) -> float:
        """Requests/s one worker paces at a mix of `chunks_per_request` streamed events each."""
        return ceiling_requests_per_s(self.to_json(), chunks_per_request)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _key() -> str:
    """What the pipeline's cost depends on, hashed: the harness's source (its C helpers too, and
    whether they are turned off), Python, uvloop, the CPU."""
    digest = hashlib.sha256()
    import harness

    harness_dir = Path(harness.__file__).resolve().parent
    for path in sorted([*harness_dir.rglob("*.py"), *harness_dir.rglob("*.c")]):
        digest.update(path.relative_to(harness_dir).as_posix().encode())
        digest.update(path.read_bytes())
    try:
        loop = f"uvloop {metadata.version('uvloop')}"
    except metadata.PackageNotFoundError:
        loop = "asyncio"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    native = os.environ.get("PASSPORT_NATIVE", "1")
    digest.update(f"{CALIBRATION_VERSION}|{native}|{sys.version}|{loop}|{platform.machine()}|{_cpu_model()}|{cpus}".encode())
    return digest.hexdigest()[:16]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _cpu_s() -> float:
    return time.process_time()  # every thread of this process


async def _shape(url: str, tokens: int, rate: float, requests: int, folder: Path) -> dict[str, float]:
    """One constant-rate open loop of `tokens`-token streams: CPU us per request sent, chunks per
    request (as recorded), the rate achieved and the loop thread's run-queue wait."""
    load = LoadSpec.model_validate({"pattern": "constant", "rate_per_s": rate,
                                    "warmup": {"requests": _WARMUP_REQUESTS}, "measure": {"requests": requests}})
    schedule = build_schedule(load)
    client = HttpClient(Endpoint.parse(url), Timeouts(), max_idle=32)
    body = (b'{"model":"sim-model","prompt":"calibration","max_tokens":%d,"stream":true,"ignore_eos":true,'
            b'"stream_options":{"include_usage":true}}' % tokens)
    prepared = PreparedRequest(client.request_bytes("/completions", body), "calibration", tokens, True, 1, None,
                               tokens)
    folder.mkdir()
    requests_w, chunks_w, telemetry_w = raw_writers(folder, lambda name, error: None)
    telemetry_w.close()
    runner = Runner(client, "completions", load, schedule, [prepared] * schedule.pool_size, requests_w, chunks_w,
                    time.perf_counter_ns(), asyncio.Event())
    await client.start()
    await client.preconnect(8)
    wait0, cpu0, wall0 = run_delay_ns(), _cpu_s(), time.perf_counter_ns()
    try:
        await runner.run()
        for writer in (requests_w, chunks_w):  # what the writer thread converted during the run counts
            writer.sync()
        cpu_s, wall_s, wait1 = _cpu_s() - cpu0, (time.perf_counter_ns() - wall0) / 1e9, run_delay_ns()
    finally:
        await client.aclose()
        requests_w.close()
        chunks_w.close()
    pacer = client.pacer.stats
    table = pq.read_table(folder / "requests.parquet", columns=["outcome", "n_chunks", "sent_ns"])
    outcomes = set(table.column("outcome").to_pylist())
    if not outcomes <= {"ok", "truncated"}:
        raise RuntimeError(f"the calibration's requests to the simulated engine failed ({sorted(outcomes)})")
    sent = table.column("sent_ns").to_numpy()
    n = table.num_rows
    chunks = float(np.sum(table.column("n_chunks").to_numpy()))
    return {"output_tokens": float(tokens), "rate_per_s": rate, "requests": float(n),
            "chunks_per_request": chunks / n, "requests_per_s": n / wall_s, "chunks_per_s": chunks / wall_s,
            "cpu_us_per_request": cpu_s / n * 1e6, "cpu_share": cpu_s / wall_s,
            "achieved_per_s": (n - 1) / ((sent.max() - sent.min()) / 1e9) if n > 1 else 0.0,
            "run_wait_share": (wait1 - wait0) / 1e9 / wall_s if wait0 is not None and wait1 is not None else -1.0,
            "pacer_realtime": float(pacer.native and pacer.realtime)}


def _measure(key: str) -> ClientCalibration:
    server, url = spawn("--ttft-ms", "0", "--itl-ms", "1")
    try:
        with tempfile.TemporaryDirectory(prefix="passport-calibration-") as tmp:
            async def each() -> list[dict[str, float]]:
                shapes = [await _shape(url, tokens, rate, n, Path(tmp) / f"shape{k}")
                          for k, (tokens, rate, n) in enumerate((_FIRST, *_SHAPES))]
                return shapes[1:]

            with quiet_interpreter():
                points = run_loop(each())
    finally:
        server.terminate()
        server.wait(5)
    fixed, per_request, per_chunk = fit_cost(points)
    realtime = all(p["pacer_realtime"] for p in points)
    return ClientCalibration(per_request * 1e6, per_chunk * 1e6,
                             PACING_CPU_SHARE_REALTIME if realtime else PACING_CPU_SHARE, utc_now(), key, "measured",
                             points, fixed)


def fit_cost(points: list[dict[str, float]]) -> tuple[float, float, float]:
    """(fixed CPU share, CPU s per request, CPU s per chunk) through the measured points: each
    point's CPU share = fixed + requests/s x per request + chunks/s x per chunk. Solved exactly
    (three points); a negative term (noise) is fixed at zero and the rest fitted by least squares."""
    shares = np.array([p["cpu_share"] for p in points])
    rows = np.array([[1.0, p["requests_per_s"], p["chunks_per_s"]] for p in points])
    terms = np.linalg.lstsq(rows, shares, rcond=None)[0]
    for dropped in (0, 2, 1):
        if (terms >= 0).all():
            break
        kept = [i for i in range(3) if i != dropped]
        terms = np.zeros(3)
        terms[kept] = np.clip(np.linalg.lstsq(rows[:, kept], shares, rcond=None)[0], 0.0, None)
    return float(terms[0]), float(terms[1]), float(terms[2])


def _number(value: Any, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def _readable(data: Any) -> bool:
    """Whether a cached file's JSON has every field of a calibration, each of its type and within
    physical bounds (a positive finite cost per request, a CPU share within one core): a file
    edited or damaged by hand is measured again, never believed."""
    return (isinstance(data, dict) and _number(data.get("cpu_us_per_request"), 1e-3, 1e7)
            and _number(data.get("cpu_us_per_chunk"), 0.0, 1e7) and _number(data.get("pacing_cpu_share"), 1e-3, 1.0)
            and _number(data.get("fixed_cpu_share", 0.0), 0.0, 1.0) and _number(data.get("version"), 0, 1e9)
            and isinstance(data.get("measured_utc"), str) and isinstance(data.get("key"), str)
            and isinstance(data.get("points"), list) and all(isinstance(p, dict) for p in data["points"]))


def _cached(path: Path, key: str) -> ClientCalibration | None:
    """The cached calibration at `path` when it is this key's, this version's and fresh enough."""
    try:
        data = json.loads(path.read_text())
        if not _readable(data):
            return None
        calibration = ClientCalibration(**{**data, "how": "cached"})
    except (OSError, ValueError, TypeError):
        return None  # none yet, or a file this version cannot read: measured again
    try:
        age_s = time.time() - dt.datetime.fromisoformat(calibration.measured_utc.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    if calibration.key != key or calibration.version != CALIBRATION_VERSION or not 0 <= age_s < _MAX_AGE_S:
        return None
    return calibration


def client_calibration(fresh: bool = False) -> ClientCalibration:
    """This machine's calibration: the cached one where valid (see the module docstring), else
    measured now (a few seconds) and cached."""
    key = _key()
    path = default_cache_dir() / "calibration" / f"client-{key}.json"
    if not fresh and (cached := _cached(path, key)) is not None:
        return cached
    calibration = _measure(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")  # two runs calibrating at once: the last wins
    partial.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
    os.replace(partial, path)
    return calibration


def calibrate_run(folder: Path, spec: RunSpec, say: Say) -> ClientCalibration | None:
    """This machine's calibration, said and written into the run folder as calibration.json
    before the timed phase: what results.client.headroom is computed from (listed with the raw
    files, so verify recomputes it). None, said, when it could not be measured: the run goes on
    without a headroom."""
    from harness import write_new  # never through a symlink planted in the folder

    try:
        calibration = client_calibration()
    except (OSError, RuntimeError, HarnessError) as exc:
        say(f"client calibration failed ({type(exc).__name__}: {exc}); this run states no headroom "
            "(`passport calibrate` shows why)")
        return None
    write_new(folder / CALIBRATION_FILE, (json.dumps(calibration.to_json(), indent=1, sort_keys=True) + "\n").encode())
    say(calibration_line(calibration, spec))
    return calibration


def expected_chunks_per_request(spec: RunSpec) -> float:
    """Streamed events a request of `spec` reads, expected before the run: its output tokens' mean
    (one event each, as most engines stream them) plus the role, usage and [DONE] events."""
    return float(spec.workload.output_tokens.sample(np.random.default_rng(0), 4096).mean()) + _EXTRA_CHUNKS


def calibration_line(calibration: ClientCalibration, spec: RunSpec) -> str:
    """What the run says before timing: the client's cost here and the ceiling at this mix."""
    mix = expected_chunks_per_request(spec)
    when = "measured now" if calibration.how == "measured" else f"cached, measured {calibration.measured_utc}"
    return (f"client: {calibration.cpu_us_per_request:.0f} us CPU per request + {calibration.cpu_us_per_chunk:.1f} "
            f"us per chunk ({when}); one worker paces ~{calibration.ceiling_requests_per_s(mix):,.0f} requests/s "
            f"at {mix:g} chunks each")
