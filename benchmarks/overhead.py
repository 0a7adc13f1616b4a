"""The harness's own cost per streamed chunk, against a bare reader and aiohttp, in one run.

Drives `_sse_server.py` (pinned to CPU 1, real-time priority where allowed; every chunk stamped
with its send time) from clients pinned to CPU 0, each in its own process:
- `bare`: an asyncio Protocol that only timestamps each read into an array('q') (the floor);
- `passport`: the full pipeline (HttpClient + httptools + SSE splitting + summarize + Parquet
  recording through the Runner and TableWriters);
- `live`: the same with the CLI's live progress line (running TTFT/TPOT percentiles, tokens/s)
  drawn by rich to a terminal it believes it has (its refresh thread's CPU counted);
- `aiohttp`: aiohttp + uvloop reading lines, as vLLM's, SGLang's and AIPerf's clients do.

For each it prints the client's CPU us per chunk (process CPU time over the streaming phase, writer
threads and the Parquet parts written during the run included; joining the parts into one file
after the run is shown apart as `finalize ms`) and the added lag (receive time minus the server's
stamp) p50/p99, over `--repeats` interleaved runs: CPU as the minimum (the least noisy estimate of
intrinsic cost, as timeit reports; the ratio to `bare` uses it) and the median; lags as medians.
Paced streams send one chunk per 10 ms per stream; bursts send back to back; 64 and 256 streams.

    .venv/bin/python benchmarks/overhead.py [--seconds 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
_now = time.perf_counter_ns
_STAMP = re.compile(rb'"t":(\d+)}')
CLIENTS = ("bare", "passport", "live", "aiohttp")
BODY = b'{"model":"bench","messages":[{"role":"user","content":"hi"}],"max_tokens":%d,"stream":true}'


def _cpu_s() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _request(port: int, n: int) -> bytes:
    body = BODY % n
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body))


def _lags_from_reads(buf: bytes, ends: array, times: array) -> np.ndarray:
    """Lag of each stamped chunk: the time of the read that completed it minus its stamp."""
    end_arr = np.frombuffer(ends, dtype=np.int64)
    t_arr = np.frombuffer(times, dtype=np.int64)
    lags = []
    for match in _STAMP.finditer(buf):
        i = int(np.searchsorted(end_arr, match.end(), side="left"))
        lags.append(t_arr[i] - int(match.group(1)))
    return np.array(lags, dtype=np.int64)


async def _bare(port: int, streams: int, chunks: int) -> tuple[int, np.ndarray, float]:
    loop = asyncio.get_running_loop()
    results: list[tuple[bytes, array, array]] = []

    class Reader(asyncio.Protocol):
        def __init__(self) -> None:
            self.buf = bytearray()
            self.ends = array("q")
            self.times = array("q")
            self.done = loop.create_future()

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transport.write(_request(port, chunks))  # type: ignore[attr-defined]

        def data_received(self, data: bytes) -> None:
            self.times.append(_now())
            self.buf += data
            self.ends.append(len(self.buf))

        def connection_lost(self, exc: Exception | None) -> None:
            results.append((bytes(self.buf), self.ends, self.times))
            self.done.set_result(None)

    cpu0 = _cpu_s()
    readers = [(await loop.create_connection(Reader, "127.0.0.1", port))[1] for _ in range(streams)]
    await asyncio.gather(*(r.done for r in readers))
    cpu = _cpu_s() - cpu0
    lags = np.concatenate([_lags_from_reads(*r) for r in results])
    return len(lags), lags, cpu


async def _aiohttp(port: int, streams: int, chunks: int) -> tuple[int, np.ndarray, float]:
    import aiohttp

    times = array("q")
    lines: list[bytes] = []

    async def one(session: aiohttp.ClientSession) -> None:
        async with session.post(f"http://127.0.0.1:{port}/v1/chat/completions", data=BODY % chunks,
                                headers={"Content-Type": "application/json"}) as resp:
            async for line in resp.content:
                if line.startswith(b"data: {\"id\""):
                    times.append(_now())
                    lines.append(line)

    cpu0 = _cpu_s()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        await asyncio.gather(*(one(session) for _ in range(streams)))
    cpu = _cpu_s() - cpu0
    stamps = np.array([int(_STAMP.search(line).group(1)) for line in lines], dtype=np.int64)  # type: ignore[union-attr]
    return len(lines), np.frombuffer(times, dtype=np.int64) - stamps, cpu


async def _live(port: int, streams: int, chunks: int) -> tuple[int, np.ndarray, float]:
    import io

    from rich.console import Console

    from passport.cli._shared import RichProgress

    bar = RichProgress(streams, console=Console(file=io.StringIO(), force_terminal=True, width=160))
    try:
        return await _passport(port, streams, chunks, progress=bar)
    finally:
        bar.stop()


async def _passport(port: int, streams: int, chunks: int, progress: Any = None) -> tuple[int, np.ndarray, float]:
    import orjson
    import pyarrow.parquet as pq

    from harness import (
        CHUNKS_SCHEMA,
        REQUESTS_SCHEMA,
        Endpoint,
        HttpClient,
        LoadSpec,
        PreparedRequest,
        Runner,
        TableWriter,
        Timeouts,
        build_schedule,
    )

    folder = Path(tempfile.mkdtemp(prefix="passport-bench-"))
    load = LoadSpec(pattern="closed", concurrency=streams, measure={"requests": streams})
    schedule = build_schedule(load)
    client = HttpClient(Endpoint.parse(f"http://127.0.0.1:{port}/v1"), Timeouts(), max_idle=streams)
    body = BODY % chunks
    prepared = PreparedRequest(client.request_bytes("/chat/completions", body), "hi", chunks, True, 1, None, chunks)
    requests_w = TableWriter(folder, "requests", REQUESTS_SCHEMA, flush_rows=256)
    chunks_w = TableWriter(folder, "chunks", CHUNKS_SCHEMA, flush_rows=8192)
    t0 = _now()
    runner = Runner(client, "chat", load, schedule, [prepared] * streams, requests_w, chunks_w, t0, asyncio.Event(),
                    progress=progress)
    cpu0 = _cpu_s()
    await client.start()
    await runner.run()
    await client.aclose()
    for writer in (requests_w, chunks_w):  # row groups written during the run are streaming cost
        writer.sync()
    cpu = _cpu_s() - cpu0
    t_close = _now()
    requests_w.close()
    chunks_w.close()
    print(json.dumps({"finalize_ms": (_now() - t_close) / 1e6}), file=sys.__stderr__)  # past rich's redirect
    table = pq.read_table(folder / "chunks.parquet")
    kinds = table.column("kind").to_pylist()
    data = table.column("data").to_pylist()
    recv = table.column("recv_ns").to_pylist()
    lags = [t0 + r - orjson.loads(d)["t"] for k, d, r in zip(kinds, data, recv) if k == "content"]
    outcomes = pq.read_table(folder / "requests.parquet").column("outcome").to_pylist()
    assert set(outcomes) == {"ok"}, outcomes
    return len(lags), np.array(lags, dtype=np.int64), cpu


def _client_main(args: argparse.Namespace) -> None:
    os.sched_setaffinity(0, {0})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (PermissionError, OSError):
        pass
    import uvloop

    fn = {"bare": _bare, "aiohttp": _aiohttp, "passport": _passport, "live": _live}[args.client]
    n, lags, cpu = uvloop.run(fn(args.port, args.streams, args.chunks))
    print(json.dumps({"chunks": n, "cpu_us_per_chunk": cpu / max(n, 1) * 1e6,
                      "lag_p50_ms": float(np.percentile(lags, 50)) / 1e6,
                      "lag_p99_ms": float(np.percentile(lags, 99)) / 1e6}))


def _wait_port(port: int) -> None:
    import socket

    for _ in range(100):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("benchmark server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each paced measurement")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each client")
    parser.add_argument("--only", metavar="MODE:STREAMS", action="append",
                        help="run only these configurations, e.g. paced:256 (repeatable)")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--chunks", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        _client_main(args)
        return
    from harness import free_port

    print(f"{'mode':<6} {'streams':>7} {'chunks/s':>9} {'client':<9} {'cpu min':>8} {'x bare':>7} {'cpu median':>10} "
          f"{'lag p50 ms':>10} {'lag p99 ms':>10} {'finalize ms':>11}")
    print("(cpu in us per chunk; x bare = min / bare's min; lags are medians over runs)")
    for mode, interval_ms in (("paced", 10.0), ("burst", 0.0)):
        wanted = [s for s in (64, 256) if not args.only or f"{mode}:{s}" in args.only]
        if not wanted:
            continue
        port = free_port()
        server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_sse_server.py")), "--port",
                                   str(port), "--interval-ms", str(interval_ms), "--cpu", "1"])
        try:
            _wait_port(port)
            for streams in wanted:
                chunks = int(args.seconds * 100) if mode == "paced" else 128_000 // streams
                rate = f"{streams * 100:,}" if mode == "paced" else "max"
                runs: dict[str, list[dict[str, float]]] = {c: [] for c in CLIENTS}
                finalize: dict[str, list[float]] = {"passport": [], "live": []}
                for _ in range(args.repeats):
                    for client in CLIENTS:  # interleaved, so slow spells hit every client alike
                        out = subprocess.run([sys.executable, __file__, "--client", client, "--port", str(port),
                                              "--streams", str(streams), "--chunks", str(chunks)],
                                             capture_output=True, text=True, timeout=300)
                        if out.returncode != 0:
                            raise RuntimeError(f"{client} failed: {out.stderr.strip()[-500:]}")
                        runs[client].append(json.loads(out.stdout))
                        if client in finalize:
                            finalize[client].append(json.loads(out.stderr.strip().splitlines()[-1])["finalize_ms"])
                med = {c: {k: float(np.median([r[k] for r in rs])) for k in rs[0]} for c, rs in runs.items()}
                low = {c: min(r["cpu_us_per_chunk"] for r in rs) for c, rs in runs.items()}
                for client in CLIENTS:
                    r = med[client]
                    ratio = low[client] / low["bare"]
                    lag50 = f"{r['lag_p50_ms']:.3f}" if mode == "paced" else "-"
                    lag99 = f"{r['lag_p99_ms']:.3f}" if mode == "paced" else "-"
                    extra = f" {np.median(finalize[client]):>11.1f}" if client in finalize else ""
                    print(f"{mode:<6} {streams:>7} {rate:>9} {client:<9} {low[client]:>8.2f} {ratio:>7.2f} "
                          f"{r['cpu_us_per_chunk']:>10.2f} {lag50:>10} {lag99:>10}{extra}", flush=True)
        finally:
            server.terminate()
            server.wait(5)


if __name__ == "__main__":
    main()
