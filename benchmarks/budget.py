"""Where a request's client CPU goes: the per-request budget of one passport worker, by stage.

`passport run` (an open Poisson loop of one-token streams against `noop_server.c`, the
roofline's zero-compute server) runs twice under cProfile, with N and 2N measured requests at the
same rate, the profiler on only while the runner sends (the event loop's thread, on its own CPU
clock); each stage's CPU per request is the difference of its time between the two runs over N,
so what the timed phase costs once (connections, the first part's conversion) cancels out.
Stages are the modules a request passes through, in order:

- `schedule + arming`: the runner's open loop, its sleeps and a task per request
  (harness/_runner.py, asyncio's tasks and timers);
- `pacer (on the loop)`: arming the send and taking the pacer thread's reports back
  (harness/_pacer.py, on the loop; the thread's own CPU is reported separately);
- `send + read`: the HTTP exchange (harness/_http.py, _transport.py), the response head;
- `stream parse`: the SSE reader (harness/_sse.py) and the answer's judgement (_openai.py);
- `record`: the row and its chunks (the runner's _record*, harness/_recorder.py), Parquet parts
  (pyarrow);
- `live figures`: progress, the client's own statistics, telemetry (harness/_clientstats.py,
  _telemetry.py, passport's progress line);
- `event loop + other`: the loop itself (uvloop's C code counts here) and everything else.

cProfile inflates Python-heavy stages (its own cost per call), so the table is for where, not for
how much: beside it, a run without the profiler gives the timed phase's CPU per request as its
passport states it (the process's CPU share, every thread, over the achieved rate: the
roofline's figure) and the pacer thread's CPU per send (results.client.pacer).

    .venv/bin/python benchmarks/budget.py [--rate 1000] [--requests 2000] [--top 30]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.roofline import _free_port, build_server, passport_figures, run_passport  # noqa: E402

STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pacer (on the loop)", ("harness/_pacer.py",)),
    ("send + read", ("harness/_http.py", "harness/_transport.py")),
    ("stream parse", ("harness/_sse.py", "harness/_openai.py")),
    ("record", ("harness/_recorder.py", "pyarrow/", "harness/_redact.py")),
    ("live figures", ("harness/_clientstats.py", "harness/_telemetry.py", "passport/cli/_shared.py",
                      "passport/run/_stages.py", "rich/")),
    ("schedule + arming", ("harness/_runner.py", "asyncio/tasks.py", "asyncio/locks.py", "asyncio/timeouts.py",
                           "asyncio/events.py", "asyncio/base_events.py")),
)
RECORD_FUNCTIONS = ("_record", "_planned_fields", "_answer_fields", "_chunk_columns", "_session_fields", "_count",
                    "_record_one", "_record_backlog", "_queue")


def _stage(filename: str, function: str) -> str:
    if filename.endswith("harness/_runner.py") and function in RECORD_FUNCTIONS:
        return "record"
    for stage, parts in STAGES:
        if any(part in filename for part in parts):
            return stage
    return "event loop + other"


# For the unprofiled run: each thread's CPU over the runner's timed phase, from /proc (Linux), the
# loop's thread apart from the rest (writer threads and the pacer thread), written to a file.
_THREADS_HOOK = """import os, time, json; import harness._runner as r; run = r.Runner.run
def _cpu():
    out = {}
    for tid in os.listdir('/proc/self/task'):
        try:
            f = open(f'/proc/self/task/{tid}/stat').read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
    return out
async def timed(self):
    a = _cpu()
    try: return await run(self)
    finally:
        b, me = _cpu(), str(os.getpid())
        rest = sum(v - a.get(k, 0.0) for k, v in b.items() if k != me)
        open(%r, 'w').write(json.dumps({'loop_s': b[me] - a.get(me, 0.0), 'rest_s': rest, 'n': self._c.done}))
r.Runner.run = timed
"""


def _run(port: int, rate: float, requests: int, work: Path, profile: Path | None) -> dict[str, float]:
    """One `passport run` as the roofline runs it (`roofline.run_passport`), profiled into
    `profile` during the runner's timed phase only (the loop's thread, by its own CPU clock);
    its figures (`roofline.passport_figures`). Unprofiled, also the loop's thread's CPU per
    request (`loop_us`) and the other threads' (`rest_us`: the pacer thread and the writers)."""
    split = work / f"threads-{time.monotonic_ns()}.json"
    if profile is not None:  # the command ends with os._exit after atexit, so an atexit handler writes it
        hook = ("import atexit, cProfile, time; import harness._runner as r; p = cProfile.Profile(time.thread_time); "
                "atexit.register(lambda: p.dump_stats(" + repr(str(profile)) + ")); run = r.Runner.run\n"
                "async def timed(self):\n p.enable()\n try: return await run(self)\n finally: p.disable()\n"
                "r.Runner.run = timed\n")
    else:
        hook = _THREADS_HOOK % str(split)
    command = ("-c", hook + "import sys; sys.argv[0] = 'passport'; from passport.cli import console; console()")
    load = {"pattern": "poisson", "rate_per_s": rate, "measure": {"requests": requests}}
    figures = passport_figures(run_passport(port, "s1", load, 8, work, command))
    if split.exists():
        got = json.loads(split.read_text())
        figures.update(loop_us=got["loop_s"] / got["n"] * 1e6, rest_us=got["rest_s"] / got["n"] * 1e6)
    return figures


def _by_stage(profile: Path) -> dict[str, float]:
    stats = pstats.Stats(str(profile))
    out: dict[str, float] = {}
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        tottime = row[2]
        stage = _stage(filename, function)
        out[stage] = out.get(stage, 0.0) + tottime
    return out


def _by_function(profile: Path, sign: float) -> dict[tuple[str, int, str], float]:
    stats = pstats.Stats(str(profile))
    return {key: sign * row[2] for key, row in stats.stats.items()}  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--requests", type=int, default=2000, help="N: the runs measure N and 2N requests")
    parser.add_argument("--top", type=int, default=0, help="also list the N dearest functions")
    args = parser.parse_args()
    binary = build_server()
    port = _free_port()
    cpus = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(["taskset", "-c", str(cpus[-1]), str(binary), str(port)])
    work = Path(tempfile.mkdtemp(prefix="budget-"))
    n = args.requests
    try:
        time.sleep(0.3)
        plain = _run(port, args.rate, 2 * n, work, None)
        profiles = (work / "small.prof", work / "large.prof")
        _run(port, args.rate, n, work, profiles[0])
        _run(port, args.rate, 2 * n, work, profiles[1])
        a, b = _by_stage(profiles[0]), _by_stage(profiles[1])
        stages = [s for s, _ in STAGES[::-1]] + ["event loop + other"]
        rows = {s: (b.get(s, 0.0) - a.get(s, 0.0)) / n * 1e6 for s in stages}
        total = sum(rows.values())
        print(f"passport run, open Poisson loop at {args.rate:g}/s of one-token streams, {n} vs {2 * n} requests, "
              f"CPU 0, noop server on CPU {cpus[-1]}")
        print("| stage | us per request (profiled) | share |")
        print("|---|---:|---:|")
        for stage in stages:
            print(f"| {stage} | {rows[stage]:.1f} | {rows[stage] / total:.0%} |")
        print(f"| **all, profiled** | **{total:.1f}** | |")
        if args.top:
            diff = _by_function(profiles[1], -1.0)
            for key, value in _by_function(profiles[0], 1.0).items():
                diff[key] = diff.get(key, 0.0) + value
            print(f"\nthe {args.top} dearest functions (us per request, their own time):")
            for (filename, line, function), value in sorted(diff.items(), key=lambda kv: kv[1])[:args.top]:
                print(f"  {-value / n * 1e6:7.1f}  {_stage(filename, function):<20} {function} ({filename}:{line})")
        print(f"| **all, unprofiled: the process, all threads** | **{plain['cpu_us']:.1f}** | |")
        print(f"| of which the loop's thread | {plain['loop_us']:.1f} | |")
        print(f"| of which the other threads (pacer, Parquet writers) | {plain['rest_us']:.1f} | |")
        print(f"| of which the pacer thread (per send) | {plain['pacer_us']:.1f} | |")
        print(f"\nunprofiled run: {plain['achieved']:,.0f} requests/s achieved, dispatch lag p99 "
              f"{plain['lag_p99_ms']:.3f} ms")
    finally:
        server.terminate()
        server.wait(5)


if __name__ == "__main__":
    main()
