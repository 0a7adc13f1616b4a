"""`load.workers` resolved to a count before the timed phase: declared, one Ray actor per node,
or (`auto`) from a short calibration of what one process holds on this machine."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import numpy as np

from harness import Endpoint, HttpClient, Timeouts
from harness.simulator import spawn
from passport.model import RunSpec
from passport.run._ray import alive_nodes
from passport.run._stages import Say

__all__ = ["resolve_workers"]

# One worker's budget: half a core for the receive path. benchmarks/overhead.py put passport at
# 1 ms added p99 lag near 25,600 chunks/s at 18 us of CPU per chunk, i.e. about half a core;
# past that the lag grows with the load.
_CPU_BUDGET = 0.5
# A closed loop's streams are assumed to decode at most this fast (chunks/s each) when the offered
# rate is not known before the run: a fast GPU server's single stream.
_CLOSED_LOOP_CHUNKS_PER_S = 100.0


def _calibrate(streams: int = 32, tokens: int = 400) -> dict[str, float]:
    """CPU microseconds per streamed chunk of this process's receive path, measured against the
    simulated engine sending back to back (about a second)."""
    server, url = spawn("--ttft-ms", "0", "--itl-ms", "0")
    try:
        async def measure() -> tuple[float, int]:
            client = HttpClient(Endpoint.parse(url), Timeouts(), max_idle=streams)
            body = (b'{"model":"sim-model","prompt":"calibration","max_tokens":%d,"stream":true,'
                    b'"ignore_eos":true}' % tokens)
            request = client.request_bytes("/completions", body)
            await client.start()
            try:
                await client.preconnect(streams)
                await asyncio.gather(*(client.exchange(request) for _ in range(streams)))  # warm
                cpu0 = time.process_time()
                done = await asyncio.gather(*(client.exchange(request) for _ in range(streams)))
                return time.process_time() - cpu0, sum(len(ex.sse) for ex in done)
            finally:
                await client.aclose()

        cpu_s, chunks = asyncio.run(measure())
    finally:
        server.terminate()
        server.wait(5)
    per_chunk_us = cpu_s / max(chunks, 1) * 1e6
    return {"cpu_us_per_chunk": per_chunk_us, "chunks": float(chunks),
            "chunks_per_s_per_worker": _CPU_BUDGET / (per_chunk_us / 1e6)}


def resolve_workers(spec: RunSpec, say: Say) -> dict[str, Any] | None:
    """load.workers as a count with how it was chosen (None: one process). `auto`: the chunks/s
    the load will offer (open loop: rate x mean output tokens; closed loop: concurrency x
    100/s, a fast server's stream) over what one process holds within half a core here."""
    declared = spec.load.workers
    if spec.load.backend == "ray":
        nodes = alive_nodes()
        count = nodes if declared == "auto" else int(declared)
        say(f"load.workers: {count} Ray actor(s) over {nodes} node(s)")
        return {"count": count, "how": "one per node" if declared == "auto" else "declared", "backend": "ray",
                "address": spec.load.ray_address or "auto", "nodes": nodes}
    if declared == 1:
        return None
    if declared != "auto":
        return {"count": int(declared), "how": "declared"}
    load = spec.load
    calibration = _calibrate()
    if load.open_loop and load.rate_per_s is not None:
        mean_tokens = float(spec.workload.output_tokens.sample(np.random.default_rng(0), 4096).mean())
        offered = load.rate_per_s * mean_tokens
        basis = f"rate {load.rate_per_s:g}/s x {mean_tokens:g} output tokens (mean)"
    else:
        offered = (load.concurrency or 1) * _CLOSED_LOOP_CHUNKS_PER_S
        basis = f"{load.concurrency or 1} streams x {_CLOSED_LOOP_CHUNKS_PER_S:g} chunks/s"
    cores = max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1)
    wanted = max(1, -(-int(offered) // max(1, int(calibration["chunks_per_s_per_worker"]))))
    count = max(1, min(wanted, cores, load.streams, 64))
    say(f"load.workers auto: {count} (offered ~{offered:,.0f} chunks/s from {basis}; one worker holds "
        f"~{calibration['chunks_per_s_per_worker']:,.0f} here at {calibration['cpu_us_per_chunk']:.1f} us per chunk; "
        f"{cores} core(s) for workers)")
    return {"count": count, "how": "calibrated", "offered_chunks_per_s": offered, "offered_basis": basis,
            "cores": cores, **calibration}
