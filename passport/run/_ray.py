"""`load.backend: ray`: the workers as Ray actors, one per worker, spread over the cluster's hosts.

Ray is the transport and the scheduler here, not a home-made protocol: the coordinator (this
process) connects to `load.ray_address` before anything is sent (an address that does not answer
is an error, exit 2), starts `load.workers` actors (spread across nodes), ships them the run's
part once through the object store (spec, schedule, prepared requests with their credential
headers taken out; never a secret: each host puts back its own, from its own
`endpoint.api_key_env`, and a session's later turns are framed by the actor's client), and each
actor runs the same `worker_phase` a local worker runs, on its own uvloop, writing its shard on
its own disk.

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

Before anything is sent, every live node reports its passport (version, a digest of the code a
worker runs, the raw schema, Python): a cluster that mixes installations is refused naming the
host (exit 2). Workers are named by their host's address and Ray's node id in the clock record,
in messages and in `protocol.workers.memory` (each actor's peak RSS); `protocol.workers.merge_s`
is the coordinator's time to write and merge the shards.

Every repetition starts when every actor is ready (a barrier actor). This process coordinates as
for local workers (engine watch, server telemetry, canaries under load); a stop here (Ctrl-C, the
engine died) reaches the actors through a control actor they poll. An actor that dies, or whose
host is cut off (Ray's head gives the node up after its health checks fail), ends the run
INCOMPLETE; what its host had written is fetched by a task pinned to that host where the host
still answers, and otherwise stays there (only rows that reached the coordinator are merged).
Shards come back as Parquet bytes and are merged like local workers' shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import logging
import os
import platform
import resource
import socket
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness import RAW_SCHEMA_VERSION, EndpointError, WorkerShare, with_headers, without_headers
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
# Every node answers who it is by then: a Ray worker process starting beside a CPU hog takes seconds
_IDENTITY_TIMEOUT_S = 120


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
    _same_passport_everywhere(address)
    return {"address": address, "nodes": nodes}


@functools.cache
def code_identity() -> dict[str, str]:
    """What a worker must share with the coordinator: passport's installed version, a digest of the
    code a worker runs (every .py file of passport, harness and workloads: the same version with an
    edited file differs), the raw-data schema its rows are written in, and the Python version."""
    import harness
    import workloads

    digest = hashlib.sha256()
    # passport's own folder from this file's place, not by importing the package from inside it
    for root in (Path(__file__).parent.parent, *(Path(str(p.__file__)).parent for p in (harness, workloads))):
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        version = metadata.version("passport")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"passport": version, "code": digest.hexdigest()[:16], "raw_schema": str(RAW_SCHEMA_VERSION),
            "python": platform.python_version()}


def _host_of_node() -> dict[str, str]:
    """Run on one node: its address and code identity."""
    return {"host": str(_ray().util.get_node_ip_address()), **code_identity()}


def _same_passport_everywhere(address: str) -> None:
    """Refuse (before anything is sent) a cluster where some live node runs another passport,
    other code or another Python than this coordinator: its workers would write rows that this
    passport would merge as if they were its own. Asks every live node, not only those the
    actors will land on (Ray places them)."""
    ray = _ray()
    task = ray.remote(num_cpus=0)(_host_of_node)
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    try:
        found = ray.get([task.options(scheduling_strategy=_on_node(node)).remote() for node in nodes],
                        timeout=_IDENTITY_TIMEOUT_S)
    except Exception as exc:  # a worker that cannot import passport fails its task; a host that hangs times out
        raise SpecError(f"the Ray cluster at {address}: a host could not report its passport ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:300] if str(exc) else ''}); install the same passport on "
                        "every host; nothing was sent") from None
    ours = code_identity()
    differ = []
    for node, h in zip(nodes, found, strict=True):
        theirs = [f"{k} {h.get(k)}" for k in ours if h.get(k) != ours[k]]
        if theirs:
            differ.append(f"host {h['host']} (node {node[:12]}) runs {', '.join(theirs)}")
    if differ:
        raise SpecError(f"the Ray cluster at {address} mixes passport installations: {'; '.join(differ)}; this "
                        f"coordinator runs " + ", ".join(f"{k} {v}" for k, v in ours.items()) + ". Install the same "
                        "passport (and Python) on every host; nothing was sent")


def _on_node(node: str) -> Any:
    """Ray's scheduling strategy for a task or actor on that node and nowhere else."""
    return require("ray.util.scheduling_strategies", _FEATURE).NodeAffinitySchedulingStrategy(node, soft=False)


def alive_nodes() -> int:
    """Nodes of the connected cluster that are up."""
    return len([n for n in _ray().nodes() if n.get("Alive")])


@dataclass(frozen=True)
class _Shipped:
    """What every actor gets once, through the object store: the run's part (t0 on the
    coordinator's clock; its prepared requests without their credential headers) and where to
    send. No secret: each actor puts its own host's credentials back (`_with_credentials`)."""

    part: Part
    base_url: str


def _shipped(part: Part, base_url: str) -> _Shipped:
    """The part with the coordinator's credential headers taken out of every prepared request
    (a session's later turns hold none: the actor's client frames them)."""
    headers = auth_headers(part.spec)
    pool = [dataclasses.replace(p, request=without_headers(p.request, headers)) if p.request and headers else p
            for p in part.pool]
    return _Shipped(dataclasses.replace(part, pool=pool), base_url)


def _with_credentials(part: Part, headers: dict[str, str]) -> Part:
    """The shipped part with this host's credential headers on every prepared request."""
    if not headers:
        return part
    return dataclasses.replace(part, pool=[dataclasses.replace(p, request=with_headers(p.request, headers))
                                           if p.request else p for p in part.pool])


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

        def node(self) -> tuple[str, str]:
            """(Ray's id of this node, its address)."""
            return str(ray.get_runtime_context().get_node_id()), str(ray.util.get_node_ip_address())

        def run(self, shipped: _Shipped, worker: int, workers: int, offset_ns: int, control: Any,
                barrier: Any) -> tuple[list[tuple[int, int, int]], str | None, dict[str, bytes], float]:
            spec = shipped.part.spec
            headers = auth_headers(spec)  # from this host's own environment
            client = access(spec, headers, base_url=shipped.base_url).streams(max_idle=spec.load.streams)
            part = _with_credentials(shipped.part, headers)
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
            shard = shard_bytes(self.folder)
            peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
            return (*report_of(results, reason), shard, peak_mib)

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

    def __init__(self, running: dict[Any, int], nodes: list[tuple[str, str]], control: Any) -> None:
        self.running, self.nodes, self.control = running, nodes, control
        self.pending = list(running)
        self.reports: dict[int, Report] = {}
        self.shards: dict[int, dict[str, bytes]] = {}
        self.peak_mib: dict[int, float] = {}
        self.dead: set[int] = set()

    def _collect(self, done: list[Any], reasons: list[str], elapsed_s: float) -> None:
        ray = _ray()

        for ref in done:
            k = self.running[ref]
            try:
                results, reason, shard, self.peak_mib[k] = ray.get(ref)
                self.reports[k], self.shards[k] = (results, reason), shard
            except Exception as exc:  # the actor (or its host) died
                self.dead.add(k)
                reasons.insert(0, f"worker {k} on {_where(self.nodes[k])} died or was cut off {elapsed_s:.1f} s into "
                                  f"the timed phase ({type(exc).__name__}); every record that reached this "
                                  "coordinator is kept")
                self.stop()
                with contextlib.suppress(Exception):  # what its host wrote, if the host is alive
                    salvage = ray.remote(num_cpus=0)(_salvage).options(
                        scheduling_strategy=_on_node(self.nodes[k][0]))
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
                reasons.append(f"worker {k} on {_where(self.nodes[k])} ended without reporting; every record that "
                               "reached this coordinator is kept")


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
        # The run's stop flag and barrier live on the coordinator's own node (under Ray Client, the
        # head's): a worker host cut off must not take with it what the other hosts wait on
        here = _on_node(ray.get_runtime_context().get_node_id())
        control = Control.options(scheduling_strategy=here).remote()
        barrier = Barrier.options(scheduling_strategy=here).remote(workers)
        actors = [Worker.options(scheduling_strategy="SPREAD").remote() for _ in range(workers)]
        nodes = ray.get([a.node.remote() for a in actors])
        before = [_clock(a) for a in actors]
        shipped = ray.put(_shipped(inputs.part, self.base_url))
        running = {actors[k].run.remote(shipped, k, workers, before[k][0], control, barrier): k
                   for k in range(workers)}
        fleet = _Actors(running, nodes, control)
        repetitions, reason = run_loop(coordinate(inputs, fleet))
        after = [_clock(a) if k in fleet.reports else (before[k][0], -1, "") for k, a in enumerate(actors)]
        started = time.perf_counter()
        for k, shard in fleet.shards.items():
            write_shard(inputs.folder, k, shard)
        merge_shards(inputs.folder, workers)
        merge_s = time.perf_counter() - started
        for actor in actors:
            ray.kill(actor)
        memory = [{"worker": k, "host": nodes[k][1], "peak_rss_mib": round(fleet.peak_mib[k], 1)}
                  for k in sorted(fleet.peak_mib)]
        return TimedOutcome(repetitions, reason, {"clocks": _clock_record(nodes, before, after), "memory": memory,
                                                  "merge_s": round(merge_s, 3)})


def _where(node: tuple[str, str]) -> str:
    """A worker's place for a message: its host's address and Ray's node id (shortened)."""
    return f"host {node[1]} (node {node[0][:12]})"


def _clock_record(nodes: list[tuple[str, str]], before: list[tuple[int, int, str]],
                  after: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    """Each actor's clock offset before and after the run, its uncertainty, how it was measured
    and whether it stayed within CLOCK_BOUND_NS (an uncertainty of -1: not measured after)."""
    clocks = []
    for k, (node, host) in enumerate(nodes):
        (offset, uncertainty, via), (offset_after, uncertainty_after, _) = before[k], after[k]
        drift = abs(offset_after - offset) if uncertainty_after >= 0 else None
        bound = max(uncertainty, uncertainty_after) + (drift or 0)
        clocks.append({"worker": k, "node": node, "host": host, "offset_ns": offset, "uncertainty_ns": uncertainty,
                       "offset_after_ns": offset_after if uncertainty_after >= 0 else None,
                       "uncertainty_after_ns": uncertainty_after if uncertainty_after >= 0 else None, "via": via,
                       "bounded": drift is not None and bound <= CLOCK_BOUND_NS})
    return clocks


def _salvage(worker: int) -> dict[str, bytes]:
    """On a dead worker's host: the shard it left in its temporary folder."""
    folders = sorted(Path(tempfile.gettempdir()).glob(f"passport-w{worker}-*"), key=os.path.getmtime)
    return shard_bytes(folders[-1]) if folders else {}
