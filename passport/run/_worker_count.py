"""`load.workers` resolved to a count before the timed phase: declared, one Ray actor per node,
or (`auto`) from the client's calibration on this machine (passport.run._calibration): what
the load will offer against what one worker paces."""

from __future__ import annotations

import math
import os
from typing import Any

from passport.model import RunSpec
from passport.run._calibration import ClientCalibration, expected_chunks_per_request
from passport.run._ray import alive_nodes
from passport.run._stages import Say

__all__ = ["resolve_workers"]

# A closed loop's streams are assumed to decode at most this fast (chunks/s each) when the offered
# rate is not known before the run: a fast GPU server's single stream.
_CLOSED_LOOP_CHUNKS_PER_S = 100.0


def resolve_workers(spec: RunSpec, calibration: ClientCalibration | None, say: Say) -> dict[str, Any] | None:
    """load.workers as a count with how it was chosen (None: one process). `auto`: the requests/s
    the load will offer (open loop: its rate; closed loop: concurrency x 100 chunks/s, a fast
    server's stream, over the mean answer) over the ceiling one worker paces at that mix (one
    worker when `calibration` is None: it could not be measured)."""
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
    if calibration is None:
        say("load.workers auto: 1 (the client calibration failed, so nothing says more are needed)")
        return {"count": 1, "how": "calibration failed"}
    load = spec.load
    chunks_per_request = expected_chunks_per_request(spec)
    if load.open_loop and load.rate_per_s is not None:
        offered = load.rate_per_s
        basis = f"rate {load.rate_per_s:g}/s"
    else:
        streams = load.concurrency or 1
        offered = streams * _CLOSED_LOOP_CHUNKS_PER_S / chunks_per_request
        basis = f"{streams} streams x {_CLOSED_LOOP_CHUNKS_PER_S:g} chunks/s over {chunks_per_request:g} chunks each"
    ceiling = calibration.ceiling_requests_per_s(chunks_per_request)
    cores = max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) - 1)
    wanted = max(1, math.ceil(offered / ceiling)) if ceiling > 0 else 64  # no share left: as many as allowed
    count = max(1, min(wanted, cores, load.streams, 64))
    say(f"load.workers auto: {count} (offered ~{offered:,.0f} requests/s from {basis}; one worker paces "
        f"~{ceiling:,.0f}/s at {chunks_per_request:g} chunks each here, so {wanted} wanted; {cores} core(s) for "
        "workers)")
    return {"count": count, "wanted": wanted, "how": "calibrated", "offered_requests_per_s": offered,
            "offered_basis": basis,
            "chunks_per_request": chunks_per_request, "ceiling_requests_per_s_per_worker": ceiling, "cores": cores,
            "cpu_us_per_request": calibration.cpu_us_per_request, "cpu_us_per_chunk": calibration.cpu_us_per_chunk,
            "pacing_cpu_share": calibration.pacing_cpu_share}
