"""The client's roofline: what one passport worker paces and parses, beside a bare asyncio client
and aiohttp against the same zero-compute server, in one run.

The server is `noop_server.c` (built here with `cc -O2`, cached under ~/.cache/passport/tools),
pinned to the last CPU; every client is pinned to CPU 0, each in its own process. Shapes:
(a) `json`, a non-streaming answer; (b) `s1`, a stream of one token; (c) `s256`, a stream of 256
one-character events. For each shape:

- `bare`: an asyncio Protocol over keep-alive connections that sends prepared bytes and counts
  the answer's Content-Length (the floor of any Python client), and `aiohttp` (+ uvloop, reading
  lines as vLLM's, SGLang's and AIPerf's clients do): each as fast as it goes with 32 connections
  (requests/s and CPU us per request);
- `passport`: `passport run` open loops (Poisson) at rising rates; its roofline is the highest
  rate whose dispatch lag p99 is <= 1 ms with >= 95 % of the offered rate achieved, with the CPU us
  per request and the lag p99 at each rate. passport always streams, so (a) is not its shape.
- `pacer`: the bare pacer, the same timer with no HTTP (harness's Pacer writing Poisson deadlines,
  armed 3 ms ahead as the runner arms them, to a socket pair), at each rung's rate and at the
  goal's 2,000/s: passport's lag p99 is printed as a ratio to it.
- `paced_floor`: a paced client in C with no runtime (`paced_floor.c`: one thread, a timerfd
  armed at each Poisson deadline, epoll, the same 32 keep-alive connections), at 2,000/s and at
  the top rung: the CPU per request that sending at deadlines and reading the answers costs on
  this machine whatever the client is written in (a wake-up for each deadline and each answer).

The server is not the bottleneck when the bare client drives it at least twice as fast as passport
paces (printed). Each rung also prints the headroom its own passport states
(results.client.headroom, from the client calibration): the calibration is right when it falls
through 1 near the measured ceiling, and its predicted CPU share sits near the measured one
(s256's events arrive in one write here, far cheaper per chunk than an engine's spaced ones, which
the calibration prices). Then long bodies both ways: a 100k-token prompt up and a 32k-token
answer down, each against its short twin: passport's TTFT must not grow with the read buffer.

    .venv/bin/python benchmarks/roofline.py [--seconds 2] [--rates 500,1000,2000,3000,4000]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness import SUCCESS_OUTCOMES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("PASSPORT_CACHE", Path.home() / ".cache" / "passport"))
SOURCE = ROOT / "benchmarks" / "noop_server.c"
FLOOR_SOURCE = ROOT / "benchmarks" / "paced_floor.c"
STREAMS = 32
BODY = b'{"model":"noop","prompt":"hi","max_tokens":1,"stream":true}'


def _cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_tool(source: Path) -> Path:
    """`source` (a C file of benchmarks/) compiled, once per source version."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    binary = CACHE / "tools" / f"{source.stem}-{digest}"
    if not binary.exists():
        compiler = shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise SystemExit(f"roofline.py needs a C compiler (cc) to build benchmarks/{source.name}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".partial")
        subprocess.run([compiler, "-O2", "-o", str(partial), str(source), "-lm"], check=True)
        partial.rename(binary)
    return binary


def build_server() -> Path:
    """The compiled no-op server."""
    return build_tool(SOURCE)


def c_floor(port: int, shape: str, rate: float, seconds: float) -> dict[str, float]:
    """benchmarks/paced_floor.c at `rate` for `seconds`, pinned to CPU 0 as the clients are: the
    CPU per request and the dispatch lag of a paced client with no runtime."""
    binary = build_tool(FLOOR_SOURCE)
    done = subprocess.run(["taskset", "-c", "0", str(binary), str(port), f"/{shape}/v1/completions", str(rate),
                           str(max(1, int(rate * seconds))), str(STREAMS)], check=True, capture_output=True, text=True)
    return {k: float(v) for k, v in json.loads(done.stdout).items()}


# -- the bare and aiohttp clients (run in their own process: --client NAME) ------------------------
async def _bare(port: int, shape: str, seconds: float) -> tuple[int, float]:
    loop = asyncio.get_running_loop()
    request = (b"POST /%s/v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (shape.encode(), len(BODY), BODY))
    end = time.monotonic() + seconds
    done = [0]

    class Client(asyncio.Protocol):
        def __init__(self) -> None:
            self.buf = bytearray()
            self.need = -1
            self.finished = loop.create_future()

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            transport.write(request)  # type: ignore[attr-defined]

        def data_received(self, data: bytes) -> None:
            self.buf += data
            while True:
                if self.need < 0:
                    head = self.buf.find(b"\r\n\r\n")
                    if head < 0:
                        return
                    at = self.buf.find(b"Content-Length: ")
                    length = int(self.buf[at + 16:self.buf.find(b"\r\n", at)])
                    self.need = head + 4 + length
                if len(self.buf) < self.need:
                    return
                del self.buf[:self.need]
                self.need = -1
                done[0] += 1
                if time.monotonic() >= end:
                    self.transport.close()
                    self.finished.set_result(None)
                    return
                self.transport.write(request)  # type: ignore[attr-defined]

    cpu0 = _cpu_s()
    clients = [(await loop.create_connection(Client, "127.0.0.1", port))[1] for _ in range(STREAMS)]
    await asyncio.gather(*(c.finished for c in clients))
    return done[0], (_cpu_s() - cpu0) / max(1, done[0]) * 1e6


async def _aiohttp(port: int, shape: str, seconds: float) -> tuple[int, float]:
    import aiohttp

    end = time.monotonic() + seconds
    done = [0]

    async def user(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < end:
            async with session.post(f"http://127.0.0.1:{port}/{shape}/v1/completions", data=BODY,
                                    headers={"Content-Type": "application/json"}) as resp:
                if shape == "json":
                    await resp.json()
                else:
                    async for _line in resp.content:
                        pass
            done[0] += 1

    cpu0 = _cpu_s()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(user(session) for _ in range(STREAMS)))
    return done[0], (_cpu_s() - cpu0) / max(1, done[0]) * 1e6


def _lag_of(lags: list[int], deadline_ns: int) -> Callable[[int], None]:
    return lambda sent_ns: lags.append(sent_ns - deadline_ns)


def _ignore(rest: bytes) -> None:
    raise AssertionError("a socket pair takes the whole request")


async def _bare_pacer(rate: float, seconds: float) -> dict[str, float]:
    """The pacer alone: Poisson deadlines at `rate`, each armed ARM_NS ahead from the loop as the
    runner arms them, written by harness's Pacer to a socket pair whose far end a thread drains;
    no HTTP, no parse, no record. Its lag (write time - deadline) is the floor passport's is
    measured against."""
    import socket
    import threading

    import numpy as np

    from harness._pacer import PacedSend, Pacer
    from harness._runner import ARM_NS

    near, far = socket.socketpair()
    def drain() -> None:
        while far.recv(65536):
            pass

    threading.Thread(target=drain, daemon=True).start()
    pacer = Pacer()
    pacer.start()
    gaps = np.random.default_rng(0).exponential(1e9 / rate, int(rate * seconds))
    start = time.perf_counter_ns() + 50_000_000
    deadlines = (start + np.cumsum(gaps)).astype(np.int64)
    lags: list[int] = []
    cpu0 = _cpu_s()
    for deadline in deadlines:
        wait = (int(deadline) - ARM_NS - time.perf_counter_ns()) / 1e9
        if wait > 0:
            await asyncio.sleep(wait)
        pacer.submit(PacedSend(int(deadline), BODY, os.dup(near.fileno()), _lag_of(lags, int(deadline)), _ignore))
    await asyncio.sleep(0.05)
    stats = pacer.stop()
    cpu_us = (_cpu_s() - cpu0) / len(deadlines) * 1e6
    near.close()
    lag = np.array(lags) / 1e6
    return {"rate": rate, "lag_p50_ms": float(np.percentile(lag, 50)), "lag_p99_ms": float(np.percentile(lag, 99)),
            "sends": float(len(lags)), "cpu_us": cpu_us, "pacer_cpu_us": stats.cpu_s / len(deadlines) * 1e6}


def _client_main(name: str, port: int, shape: str, seconds: float, rate: float) -> None:
    import uvloop

    if name == "pacer":
        print(json.dumps(uvloop.run(_bare_pacer(rate, seconds))))
        return
    t0 = time.monotonic()
    n, cpu_us = uvloop.run((_bare if name == "bare" else _aiohttp)(port, shape, seconds))
    print(json.dumps({"rate": n / (time.monotonic() - t0), "cpu_us": cpu_us}))


def run_client(name: str, port: int, shape: str, seconds: float, rate: float = 0.0) -> dict[str, float]:
    out = subprocess.run(["taskset", "-c", "0", sys.executable, __file__, "--client", name, "--port", str(port),
                          "--shape", shape, "--seconds", str(seconds), "--rate", str(rate)], capture_output=True,
                         text=True, check=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- passport --------------------------------------------------------------------------------------
def run_passport(port: int, shape: str, load: dict[str, Any], input_tokens: int, work: Path,
                 command: tuple[str, ...] = ("-m", "passport.cli")) -> dict[str, Any]:
    """One `passport run` as a user runs it, pinned to CPU 0; its passport and raw requests.
    `command`: what follows the interpreter (benchmarks/budget.py profiles the run through it)."""
    spec = {"name": f"roofline-{shape}", "endpoint": {"base_url": f"http://127.0.0.1:{port}/{shape}/v1",
                                                      "api": "completions", "model": "noop"},
            "workload": {"tokenizer": "none", "input_tokens": {"dist": "fixed", "value": input_tokens},
                         "output_tokens": {"dist": "fixed", "value": int(shape[1:])}},  # the events it sends
            "load": {"warmup": {"requests": 0}, **load}, "canaries": "none",
            "telemetry": {"metrics": "off", "nvml": "off"},
            "validity": {"max_client_cpu_share": 100, "max_loop_lag_p99_ms": 10000, "max_dispatch_lag_p99_ms": 10000,
                         "min_achieved_rate_fraction": 0.01, "max_error_rate": 1.0}}
    path = work / f"spec-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(spec))
    out = work / f"out-{time.monotonic_ns()}"
    done = subprocess.run(["taskset", "-c", "0", sys.executable, *command, "run", str(path), "--out",
                           str(out), "--quiet"], check=False, capture_output=True, text=True, cwd=ROOT)
    run = next((p for p in out.iterdir() if p.is_dir()), None) if out.is_dir() else None
    if run is None:
        raise SystemExit(f"passport run made no run folder (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    passport = json.loads((run / "passport.json").read_text())
    requests = pq.read_table(run / "requests.parquet").to_pandas()
    return {"passport": passport, "requests": requests}


def passport_at(port: int, shape: str, rate: float, seconds: float, work: Path) -> dict[str, float]:
    got = run_passport(port, shape, {"pattern": "poisson", "rate_per_s": rate,
                                     "measure": {"requests": int(rate * seconds)}}, 8, work)
    return {"rate": rate, **passport_figures(got)}


def passport_figures(got: dict[str, Any]) -> dict[str, float]:
    """An open loop's figures from `run_passport`: the rate achieved, the dispatch lag p99, the
    timed phase's CPU per request (its CPU share, every thread, over the rate achieved), the
    pacer thread's CPU per send, the share answered, and the passport's headroom."""
    r = got["requests"]
    lag_ms = (r.sent_ns - r.intended_ns) / 1e6
    span_s = (r.sent_ns.max() - r.sent_ns.min()) / 1e9
    achieved = (len(r) - 1) / span_s if span_s > 0 else 0.0
    client = got["passport"]["results"]["client"]
    ok = float(r.outcome.isin(SUCCESS_OUTCOMES).mean())  # "truncated": the answer filled max_tokens
    headroom = client.get("headroom") or {}
    pacer = client.get("pacer") or {}
    return {"achieved": achieved, "lag_p99_ms": float(lag_ms.quantile(0.99)),
            "cpu_us": client["cpu_share_mean"] / max(achieved, 1e-9) * 1e6, "ok": ok,
            "pacer_us": pacer.get("cpu_us_per_send") or float("nan"),
            "cpu_share": client["cpu_share_mean"], "headroom": headroom.get("factor", float("nan")),
            "predicted_share": headroom.get("predicted_cpu_share", float("nan"))}


def roofline(port: int, shape: str, rates: list[float], seconds: float,
             work: Path) -> tuple[float, list[dict[str, float]]]:
    ladder, best = [], 0.0
    for rate in rates:
        step = passport_at(port, shape, rate, seconds, work)
        ladder.append(step)
        if step["lag_p99_ms"] <= 1.0 and step["achieved"] >= 0.95 * rate and step["ok"] == 1.0:
            best = rate
        else:
            break
    return best, ladder


def ttft_p50_ms(port: int, shape: str, input_tokens: int, work: Path, n: int = 8) -> float:
    """TTFT p50 of `n` requests 0.25 s apart (each answer recorded before the next is sent: a
    32k-event answer takes ~70 ms to record, and a closed loop would time the next one's TTFT
    behind that)."""
    got = run_passport(port, shape, {"pattern": "constant", "rate_per_s": 4, "measure": {"requests": n}},
                       input_tokens, work)
    r = got["requests"]
    return float(((r.first_token_ns - r.sent_ns) / 1e6).median())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rates", default="500,1000,2000,3000,4000,6000")
    parser.add_argument("--client", choices=("bare", "aiohttp", "pacer"), help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        _client_main(args.client, args.port, args.shape, args.seconds, args.rate)
        return
    binary = build_server()
    port = _free_port()
    cpus = sorted(os.sched_getaffinity(0))
    server = subprocess.Popen(["taskset", "-c", str(cpus[-1]), str(binary), str(port)])
    work = Path(tempfile.mkdtemp(prefix="roofline-"))
    rates = [float(r) for r in args.rates.split(",")]
    try:
        time.sleep(0.3)
        print(f"server: {binary.name} on CPU {cpus[-1]}; clients on CPU 0; {STREAMS} connections for bare and "
              f"aiohttp; passport open loops of {args.seconds:g} s per rate")
        print(f"{'shape':6} {'bare req/s':>11} {'us/req':>7} {'aiohttp':>9} {'us/req':>7} {'passport':>9} "
              f"{'us/req':>7} {'passport/bare':>14} {'bare/passport':>14}")
        for shape in ("json", "s1", "s256"):
            bare = run_client("bare", port, shape, args.seconds)
            aio = run_client("aiohttp", port, shape, args.seconds)
            if shape == "json":
                print(f"{shape:6} {bare['rate']:11,.0f} {bare['cpu_us']:7.1f} {aio['rate']:9,.0f} {aio['cpu_us']:7.1f} "
                      f"{'-':>9} {'-':>7} {'(passport always streams)':>30}")
                continue
            best, ladder = roofline(port, shape, rates, args.seconds, work)
            at_best = next((s for s in ladder if s["rate"] == best), ladder[0])
            print(f"{shape:6} {bare['rate']:11,.0f} {bare['cpu_us']:7.1f} {aio['rate']:9,.0f} {aio['cpu_us']:7.1f} "
                  f"{best:9,.0f} {at_best['cpu_us']:7.1f} {best / bare['rate']:14.2f} "
                  f"{bare['rate'] / max(best, 1):14.1f}")
            for step in ladder:
                floor = run_client("pacer", port, shape, args.seconds, step["rate"])
                print(f"       passport at {step['rate']:6,.0f}/s: achieved {step['achieved']:7,.0f}/s, dispatch lag "
                      f"p99 {step['lag_p99_ms']:6.3f} ms (the bare pacer's {floor['lag_p99_ms']:.3f} ms, "
                      f"x{step['lag_p99_ms'] / max(floor['lag_p99_ms'], 1e-6):.1f}), "
                      f"{step['cpu_us']:6.1f} us CPU per request, "
                      f"CPU share {step['cpu_share']:.2f} (calibration predicts {step['predicted_share']:.2f}), "
                      f"passport's headroom {step['headroom']:.2f}, ok {step['ok']:.0%}")
        goal = run_client("pacer", port, "s1", args.seconds, 2000.0)
        print(f"the bare pacer (the same timer, no HTTP) at 2,000/s: dispatch lag p50 {goal['lag_p50_ms']:.3f} ms, "
              f"p99 {goal['lag_p99_ms']:.3f} ms; {goal['cpu_us']:.1f} us CPU per send ({goal['pacer_cpu_us']:.1f} in "
              "the pacer's thread)")
        for rate in sorted({2000.0, max(rates)}):
            c = c_floor(port, "s1", rate, args.seconds)
            print(f"a paced client in C (benchmarks/paced_floor.c: one thread, a timerfd per deadline, epoll, no "
                  f"runtime{', real-time' if c['realtime'] else ''}) at {rate:,.0f}/s: {c['cpu_us']:.1f} us CPU per "
                  f"request, dispatch lag p50 {c['lag_p50_us'] / 1e3:.3f} ms, p99 {c['lag_p99_us'] / 1e3:.3f} ms")
        short_up, long_up = ttft_p50_ms(port, "s1", 8, work), ttft_p50_ms(port, "s1", 100_000, work)
        short_down, long_down = ttft_p50_ms(port, "s1", 8, work), ttft_p50_ms(port, "s32768", 8, work)
        print(f"long bodies (passport, 4 requests/s, TTFT p50): 100k-token prompt {long_up:.2f} ms vs 8 tokens "
              f"{short_up:.2f} ms; 32k-token answer {long_down:.2f} ms vs 1 token {short_down:.2f} ms")
    finally:
        server.terminate()
        server.wait(5)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
