"""`load.backend: ray`: the workers as Ray actors, one per worker, spread over the cluster's hosts.

Ray is the transport and the scheduler here, not a home-made protocol: the coordinator (this
process) connects to `load.ray_address` before anything is sent (an address that does not answer
is an error, exit 2), starts `load.workers` actors (spread across nodes), ships them the run's
part once through the object store (spec, schedule, prepared requests; never a secret: each host
builds its Authorization header from its own `endpoint.api_key_env`), and each actor runs the
same `worker_phase` a local worker runs, on its own uvloop, writing its shard on its own disk.

Clocks: each host has its own monotonic clock. Before and after the run the coordinator
estimates each actor's offset with round trips straight to a clock echo the actor serves on its
host (`_clock_echo`: offset = remote - the midpoint of the local send and receive, from the fastest
of 200; its uncertainty is half that round trip; where the echo port cannot be reached, the fastest
of 16 Ray calls, far coarser, and the record says `via: ray`) and the actor runs
on the coordinator's clock shifted by the offset, so its rows are on the run's clock within the
uncertainty. A request's own latencies (TTFT, ITL, E2E) are read on one host's clock and carry no
offset error; what compares times across hosts (dispatch lag against the intended time, the
window's rates, telemetry alignment) carries the uncertainty, which `protocol.workers.clocks`
records; an offset that moved or is uncertain by more than 1 ms is flagged `bounded: false`, and
the validity rule `clock_offsets` warns.

Every repetition starts when every actor is ready (a barrier actor). This process coordinates as
for local workers (engine watch, server telemetry, canaries under load); a stop here (Ctrl-C, the
engine died) reaches the actors through a control actor they poll. An actor that dies ends the run
INCOMPLETE; what its host had written is fetched by a task pinned to that host. Shards come back
as Parquet bytes and are merged like local workers' shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness import EndpointError, WorkerShare
from passport._errors import SpecError
from passport._optional import require
from passport.model import RunSpec
from passport.run._clock_echo import ClockEcho, measure_offset
from passport.run._endpoint import access, auth_headers
from passport.run._fleet import Report, coordinate, report_of, worker_phase
from passport.run._phase import Part, TimedInputs, TimedOutcome, run_loop
from passport.run._shards import merge_shards, shard_bytes, write_shard
from passport.run._stages import Say

__all__ = ["connect_ray", "RayActors", "alive_nodes", "CLOCK_BOUND_NS"]

CLOCK_BOUND_NS = 1_000_000  # an offset uncertain (or moving) by more than this is not bounded
_PROBES = 16
# A task that fetches a dead worker's rows starts a fresh Ray worker process on its host, which beside a CPU
# hog on two cores may take more than the 30 s once allowed. The run is over by then; its records are worth it.
_SALVAGE_TIMEOUT_S = 120
_FEATURE = "load.backend: ray (installed on every host)"


def _ray() -> Any:
    """The `ray` module, or MissingModuleError naming the extra that brings it."""
    return require("ray", _FEATURE)


def _reachable(address: str) -> None:
    """Fail fast when a host:port (or ray://host:port) address refuses connections: ray.init
    would wait a minute before saying so."""
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.hostname is None or parts.port is None:
        raise SpecError(f"load.ray_address {address!r}: write HOST:PORT (the head's GCS port, e.g. 10.0.0.5:6379), "
                        "ray://HOST:PORT (Ray Client) or auto")
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=3).close()
    except OSError as exc:
        raise EndpointError(f"cannot reach the Ray cluster at {address}: {exc}; start it (`ray start --head`) or fix "
                            "load.ray_address; nothing was sent") from None


def connect_ray(spec: RunSpec, say: Say) -> dict[str, Any]:
    """Connect to the spec's Ray cluster (before anything is sent); its nodes, for the protocol."""
    ray = _ray()
    if spec.endpoint.base_url and urlsplit(spec.endpoint.base_url).username:
        raise SpecError("load.backend: ray: credentials in endpoint.base_url would travel to other hosts; give the "
                        "key through endpoint.api_key_env, exported on every host")
    address = spec.load.ray_address or "auto"
    _reachable(address)
    try:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, logging_level=logging.ERROR,
                 configure_logging=False)
    except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError by version
        raise EndpointError(f"cannot join the Ray cluster at {address}: {exc}; nothing was sent") from None
    nodes = alive_nodes()
    say(f"Ray cluster at {address}: {nodes} node(s)")
    return {"address": address, "nodes": nodes}


def alive_nodes() -> int:
    """Nodes of the connected cluster that are up."""
    return len([n for n in _ray().nodes() if n.get("Alive")])


@dataclass(frozen=True)
class _Shipped:
    """What every actor gets once, through the object store: the run's part (t0 on the
    coordinator's clock) and where to send (no secret: see the module docstring)."""

    part: Part
    base_url: str


def _actor_classes() -> tuple[Any, Any, Any]:
    ray = _ray()

    @ray.remote(num_cpus=1)
    class Worker:
        """One worker on some host."""

        def now_ns(self) -> int:
            return time.perf_counter_ns()

        def clock_echo(self) -> tuple[str, int]:
            """Start (once) this host's clock echo; its address."""
            if not hasattr(self, "echo"):
                self.echo = ClockEcho(str(ray.util.get_node_ip_address()))
            return self.echo.address

        def node(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

        def run(self, shipped: _Shipped, worker: int, workers: int, offset_ns: int, control: Any,
                barrier: Any) -> tuple[list[tuple[int, int, int]], str | None, dict[str, bytes]]:
            part = shipped.part
            spec = part.spec
            client = access(spec, auth_headers(spec), base_url=shipped.base_url).streams(max_idle=spec.load.streams)
            local = dataclasses.replace(part, t0_ns=part.t0_ns + offset_ns)  # the run's clock, on this host
            self.folder = Path(tempfile.mkdtemp(prefix=f"passport-w{worker}-"))

            async def start(rep: int) -> None:  # hosts' clocks differ: each starts on its own at the release
                await barrier.wait.remote(rep)
                return None

            async def stopped() -> bool:
                return bool(await control.stopped.remote())

            results, reason = run_loop(worker_phase(local, client, WorkerShare(worker, workers, start), self.folder,
                                                    stopped, None))
            if reason is not None:
                control.stop.remote()
            return (*report_of(results, reason), shard_bytes(self.folder))

    @ray.remote(num_cpus=0)
    class Control:
        def __init__(self) -> None:
            self._stopped = False

        def stop(self) -> None:
            self._stopped = True

        def stopped(self) -> bool:
            return self._stopped

    @ray.remote(num_cpus=0)
    class Barrier:
        def __init__(self, parties: int) -> None:
            self._parties = parties
            self._arrived: dict[int, int] = {}
            self._events: dict[int, asyncio.Event] = {}

        async def wait(self, rep: int) -> None:
            event = self._events.setdefault(rep, asyncio.Event())
            self._arrived[rep] = self._arrived.get(rep, 0) + 1
            if self._arrived[rep] >= self._parties:
                event.set()
            await event.wait()

    return Worker, Control, Barrier


def _clock(actor: Any) -> tuple[int, int, str]:
    """(offset of the actor's clock from ours, its uncertainty, how it was measured): round trips
    to the actor's clock echo, or Ray calls where the echo cannot be reached."""
    ray = _ray()

    with contextlib.suppress(OSError):
        return (*measure_offset(ray.get(actor.clock_echo.remote())), "socket")
    best: tuple[int, int] | None = None
    for _ in range(_PROBES):
        sent = time.perf_counter_ns()
        remote = ray.get(actor.now_ns.remote())
        back = time.perf_counter_ns()
        sample = (remote - (sent + back) // 2, (back - sent) // 2)
        if best is None or sample[1] < best[1]:
            best = sample
    assert best is not None
    return (*best, "ray")


class _Actors:
    """The Ray workers as the coordinator sees them (a passport.run._fleet.Fleet)."""

    def __init__(self, running: dict[Any, int], nodes: list[str], control: Any) -> None:
        self.running, self.nodes, self.control = running, nodes, control
        self.pending = list(running)
        self.reports: dict[int, Report] = {}
        self.shards: dict[int, dict[str, bytes]] = {}
        self.dead: set[int] = set()

    def _collect(self, done: list[Any], reasons: list[str], elapsed_s: float) -> None:
        ray = _ray()
        affinity = require("ray.util.scheduling_strategies", _FEATURE).NodeAffinitySchedulingStrategy

        for ref in done:
            k = self.running[ref]
            try:
                results, reason, shard = ray.get(ref)
                self.reports[k], self.shards[k] = (results, reason), shard
            except Exception as exc:  # the actor (or its host) died
                self.dead.add(k)
                reasons.insert(0, f"worker {k} on node {self.nodes[k][:12]} died {elapsed_s:.1f} s into the timed "
                                  f"phase ({type(exc).__name__}); every worker's records so far are kept")
                self.stop()
                with contextlib.suppress(Exception):  # what its host wrote, if the host is alive
                    salvage = ray.remote(num_cpus=0)(_salvage).options(
                        scheduling_strategy=affinity(self.nodes[k], soft=False))
                    self.shards[k] = ray.get(salvage.remote(k), timeout=_SALVAGE_TIMEOUT_S)

    def poll(self, reasons: list[str], elapsed_s: float) -> bool:
        ray = _ray()

        if self.pending:
            done, self.pending = ray.wait(self.pending, num_returns=len(self.pending), timeout=0)
            self._collect(done, reasons, elapsed_s)
        return bool(self.pending)

    def stop(self) -> None:
        self.control.stop.remote()

    def counts(self) -> tuple[int, int, int] | None:
        return None  # an actor busy sending answers no call; the line shows elapsed time only

    def finish(self, reasons: list[str]) -> None:
        ray = _ray()

        if self.pending:  # stopped: what is in flight is recorded as interrupted, then they report
            done, self.pending = ray.wait(self.pending, num_returns=len(self.pending), timeout=60)
            self._collect(done, reasons, 0.0)
        for k in range(len(self.nodes)):
            if k not in self.reports and k not in self.dead:
                reasons.append(f"worker {k} on node {self.nodes[k][:12]} ended without reporting; every worker's "
                               "records so far are kept")


class RayActors:
    """The Backend of `load.backend: ray`: start the actors, measure their clocks, run them under
    the coordinator (engine watch, telemetry, canaries under load, as a local run), collect and
    merge their shards; the outcome carries the clock record for the protocol."""

    def __init__(self, workers: int, base_url: str) -> None:
        self.workers, self.base_url = workers, base_url

    def run(self, inputs: TimedInputs) -> TimedOutcome:
        ray = _ray()

        workers = self.workers
        Worker, Control, Barrier = _actor_classes()
        control, barrier = Control.remote(), Barrier.remote(workers)
        actors = [Worker.options(scheduling_strategy="SPREAD").remote() for _ in range(workers)]
        nodes = ray.get([a.node.remote() for a in actors])
        before = [_clock(a) for a in actors]
        shipped = ray.put(_Shipped(inputs.part, self.base_url))
        running = {actors[k].run.remote(shipped, k, workers, before[k][0], control, barrier): k
                   for k in range(workers)}
        fleet = _Actors(running, nodes, control)
        repetitions, reason = run_loop(coordinate(inputs, fleet))
        after = [_clock(a) if k in fleet.reports else (before[k][0], -1, "") for k, a in enumerate(actors)]
        for k, shard in fleet.shards.items():
            write_shard(inputs.folder, k, shard)
        merge_shards(inputs.folder, workers)
        for actor in actors:
            ray.kill(actor)
        return TimedOutcome(repetitions, reason, {"clocks": _clock_record(nodes, before, after)})


def _clock_record(nodes: list[str], before: list[tuple[int, int, str]],
                  after: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """Each actor's clock offset before and after the run, its uncertainty, how it was measured
    and whether it stayed within CLOCK_BOUND_NS (an uncertainty of -1: not measured after)."""
    clocks = []
    for k, node in enumerate(nodes):
        (offset, uncertainty, via), (offset_after, uncertainty_after, _) = before[k], after[k]
        drift = abs(offset_after - offset) if uncertainty_after >= 0 else None
        bound = max(uncertainty, uncertainty_after) + (drift or 0)
        clocks.append({"worker": k, "node": node, "offset_ns": offset, "uncertainty_ns": uncertainty,
                       "offset_after_ns": offset_after if uncertainty_after >= 0 else None,
                       "uncertainty_after_ns": uncertainty_after if uncertainty_after >= 0 else None, "via": via,
                       "bounded": drift is not None and bound <= CLOCK_BOUND_NS})
    return clocks


def _salvage(worker: int) -> dict[str, bytes]:
    """On a dead worker's host: the shard it left in its temporary folder."""
    folders = sorted(Path(tempfile.gettempdir()).glob(f"passport-w{worker}-*"), key=os.path.getmtime)
    return shard_bytes(folders[-1]) if folders else {}
