"""Several "hosts" on one Linux machine: network namespaces joined by a bridge, each with its own
address, its own /tmp and /dev/shm, optionally its own monotonic clock, and links that can be
delayed, made lossy or cut, for testing `load.backend: ray` across hosts for real.

    .venv/bin/python scripts/netns_hosts.py up --hosts 5 [--clock 2=37] [--wire 3]
    .venv/bin/python scripts/netns_hosts.py exec 2 -- ip addr     # a command on host 2
    .venv/bin/python scripts/netns_hosts.py down                  # also after a failed test

Host i is network namespace `pph<i>` with address 10.77.0.<10+i>/24 on bridge `ppbr` (the root
namespace is 10.77.0.1 on it, so this machine reaches every host); commands run through
`ip netns exec` and, with `private=True`, `unshare --mount` with tmpfs over /tmp and /dev/shm (a
real host does not see another's temporary files, Ray's session folder or its shared-memory
object store). A host given a clock offset runs in a time namespace whose CLOCK_MONOTONIC and
CLOCK_BOOTTIME are shifted by that many seconds (`unshare --time`), so its clock differs from the
coordinator's by a known amount.

Links: a host's link is a veth pair (cut with `cut`, restored with `mend`), or with `--wire` two TAP
devices joined by a userspace wire (`Wire`, a process of this script) that delays each direction
by its own amount, with jitter and loss, changed while it runs. That stands in for `tc netem`:
the kernels of these machines are built without sch_netem ("Specified qdisc kind is unknown"),
and a wire in user space works wherever /dev/net/tun does. Its own cost is a few tens of
microseconds per frame (Python), so a wired host's link is never zero-delay: compare timings
across wired hosts only, or against the delay set.

Needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2, util-linux's unshare and /dev/net/tun;
`unavailable()` says what is missing, for a test to skip with that reason. Everything is named
with the prefix `pp`, and `down` removes whatever carries it (processes in the namespaces
included), so a test bed left by a killed test never blocks the next.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import functools
import json
import os
import random
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.77.0"
BRIDGE = "ppbr"
_CLI_STATE = Path("/run/passport-netns")
_TUNSETIFF = 0x400454CA
_IFF_TAP, _IFF_NO_PI = 0x0002, 0x1000


def namespace(i: int) -> str:
    return f"pph{i}"


def address(i: int) -> str:
    """Host i's IPv4 address."""
    return f"{SUBNET}.{10 + i}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=20)


def unavailable() -> str | None:
    """Why this machine cannot hold the test bed, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    for tool in ("ip", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (iproute2 / util-linux)"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (the userspace wire needs TAP devices)"
    # a name of this process's own: each pytest worker probes while it collects, and two probes of
    # one name raced ("File exists"), skipping the multi-host tests on the worker that lost
    probe = f"pphprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this machine refuses network namespaces: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One host of the bed: its index, how its link is made, its clock offset."""

    index: int
    clock_offset_s: int = 0
    wired: bool = False
    wire: subprocess.Popen[bytes] | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return namespace(self.index)

    @property
    def address(self) -> str:
        return address(self.index)

    @property
    def link(self) -> str:
        """The name of its link's end on the bridge, in the root namespace."""
        return f"ppv{self.index}"


class Bed:
    """The namespaces, the bridge and the processes started on the hosts; `down` undoes it all."""

    def __init__(self, hosts: int, clocks: dict[int, int] | None = None, wired: Sequence[int] = (),
                 state: Path | None = None) -> None:
        self.hosts = [Host(i, (clocks or {}).get(i, 0), i in wired) for i in range(hosts)]
        self.state = state or Path(f"/run/passport-netns-{os.getpid()}")

    def up(self) -> Bed:
        down()
        self.state.mkdir(parents=True, exist_ok=True)
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for h in self.hosts:
            _ip("netns", "add", h.ns)
            _ip("-n", h.ns, "link", "set", "lo", "up")
            if h.wired:
                h.wire = subprocess.Popen([sys.executable, __file__, "wire", h.link, f"ppt{h.index}",
                                           "--control", str(self._control(h))], stdout=subprocess.PIPE)
                assert h.wire.stdout is not None
                with h.wire.stdout:
                    if h.wire.stdout.readline().strip() != b"ready":
                        raise RuntimeError(f"the wire of host {h.index} did not start")
                _ip("link", "set", f"ppt{h.index}", "netns", h.ns)
                _ip("-n", h.ns, "link", "set", f"ppt{h.index}", "name", "eth0")
            else:
                _ip("link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
            _ip("link", "set", h.link, "master", BRIDGE)
            _ip("link", "set", h.link, "up")
            _ip("-n", h.ns, "addr", "add", f"{h.address}/24", "dev", "eth0")
            _ip("-n", h.ns, "link", "set", "eth0", "up")
            _ip("-n", h.ns, "route", "add", "default", "via", f"{SUBNET}.1")
        for h in self.hosts:  # the bridge learns every port before the first test
            self.run(h.index, ["true"])
        return self

    def _control(self, h: Host) -> Path:
        return self.state / f"wire{h.index}.json"

    def argv(self, i: int, argv: Sequence[str], private: bool = True) -> list[str]:
        """`argv` as run on host i: in its network namespace, with a private /tmp and /dev/shm
        (unless `private` is False: the coordinator's host shares this machine's) and its clock.
        A private /tmp still shows what a host is installed from (the checkout and the Python
        environment running this, where they lie under /tmp, as in a CI clone there)."""
        h = self.hosts[i]
        wrap = ["ip", "netns", "exec", h.ns]
        if not private and not h.clock_offset_s:
            return [*wrap, *argv]
        wrap += ["unshare", "--mount", "--propagation", "private"]
        if h.clock_offset_s:
            wrap += ["--time", f"--monotonic={h.clock_offset_s}", f"--boottime={h.clock_offset_s}", "--fork"]
        mounts = ""
        if private:  # the machine's /tmp parked on a stage, a tmpfs over it, the installation bound back
            stage = shlex.quote(str(self.state / "tmp"))
            keep = "".join(f"mkdir -p {shlex.quote(d)} && mount --bind {stage}{shlex.quote(d[len('/tmp'):])} "
                           f"{shlex.quote(d)} && " for d in _installed_under_tmp())
            mounts = (f"mkdir -p {stage} && mount --bind /tmp {stage} && mount -t tmpfs tmpfs /tmp && {keep}"
                      f"umount -l {stage} && mount -t tmpfs tmpfs /dev/shm && ")
        return [*wrap, "sh", "-c", f'{mounts}exec "$@"', "sh", *argv]

    def run(self, i: int, argv: Sequence[str], private: bool = True, timeout_s: float = 60,
            env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(i, argv, private), capture_output=True, text=True, timeout=timeout_s,
                              env=env, cwd=cwd)

    def start(self, i: int, argv: Sequence[str], private: bool = True, env: dict[str, str] | None = None,
              log: Path | None = None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        """A long-running process on host i (stopped by `down`); its output to `log` or nowhere."""
        with open(log or os.devnull, "ab") as out:  # the process keeps its own copy
            proc = subprocess.Popen(self.argv(i, argv, private), stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, cwd=cwd)
        self.hosts[i].procs.append(proc)
        return proc

    def stop(self, i: int) -> None:
        """Kill every process on host i (what `start` began and anything they left)."""
        h = self.hosts[i]
        for proc in h.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        h.procs.clear()
        _kill_in(h.ns)

    def impair(self, i: int, out_ms: float = 0.0, back_ms: float = 0.0, jitter_ms: float = 0.0,
               loss: float = 0.0) -> None:
        """Delay what host i sends by `out_ms` and what it receives by `back_ms` (each ± `jitter_ms`),
        and drop a `loss` share of frames each way (a `--wire` host only)."""
        h = self.hosts[i]
        if h.wire is None:
            raise ValueError(f"host {i} has a plain link; give it a wire (Bed(wired=[{i}])) to impair it")
        self._control(h).write_text(json.dumps({"out_ms": out_ms, "back_ms": back_ms, "jitter_ms": jitter_ms,
                                                "loss": loss}))
        h.wire.send_signal(signal.SIGUSR1)
        time.sleep(0.05)

    def cut(self, i: int) -> None:
        """Take host i off the network (its link down): a partition, as a pulled cable."""
        _ip("link", "set", self.hosts[i].link, "down")

    def mend(self, i: int) -> None:
        _ip("link", "set", self.hosts[i].link, "up")

    def down(self) -> None:
        for h in self.hosts:
            self.stop(h.index)
            if h.wire is not None and h.wire.poll() is None:
                h.wire.kill()
                h.wire.wait(10)
        down()
        shutil.rmtree(self.state, ignore_errors=True)


@functools.cache
def _installed_under_tmp() -> list[str]:
    """The folders under /tmp that every host must see: this checkout, the Python environment
    (and the interpreter it was made from) running this script, and passport's cache (the engines
    .venv/bin links to, the models, the tokenizers) where $PASSPORT_CACHE puts it there."""
    from workloads import default_cache_dir  # the package's import takes a second: only when a host is made

    found: list[str] = []
    for path in sorted({Path(__file__).resolve().parent.parent, Path(sys.prefix).resolve(),
                        Path(sys.base_prefix).resolve(), default_cache_dir().expanduser().resolve()}):
        if path.is_relative_to("/tmp") and path != Path("/tmp") and not any(
                path.is_relative_to(f) for f in found):
            found.append(str(path))
    return found


def _kill_in(ns: str) -> None:
    """Kill every process in network namespace `ns`."""
    pids = _ip("netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            continue


def down() -> None:
    """Remove every namespace, link and wire this script makes (named pp...), and what runs in them."""
    listed = _ip("netns", "list", check=False).stdout.split("\n")
    for ns in (line.split()[0] for line in listed if line.startswith("pph")):
        _kill_in(ns)
        _ip("netns", "del", ns, check=False)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if name == BRIDGE or name.startswith(("ppv", "ppt")):
            _ip("link", "del", name, check=False)
    subprocess.run(["pkill", "-f", f"{Path(__file__).name} wire "], capture_output=True, check=False)


RAY_PORT = 6379
# The head (GCS) declares a host dead after about 2 s without an answer (Ray's default is ~15 s),
# so a partition shows within a test's patience
RAY_HEAD_ENV = {"RAY_health_check_period_ms": "500", "RAY_health_check_timeout_ms": "500",
                "RAY_health_check_failure_threshold": "4", "RAY_USAGE_STATS_ENABLED": "0"}


def start_ray(bed: Bed, head: int, workers: Sequence[int], env: dict[str, str] | None = None,
              worker_env: dict[int, dict[str, str]] | None = None, timeout_s: float = 120) -> str:
    """A Ray cluster of real `ray start` processes: the head on host `head` (no CPUs: the actors go
    to the workers; it shares this machine's /tmp, as the coordinator that runs there must), one
    worker node of one CPU on each of `workers` (each in its private /tmp). `env` is every host's
    environment, `worker_env[i]` what host i adds. The head's GCS address once every node is up."""
    ray = str(Path(sys.executable).with_name("ray"))
    base = {**os.environ, **(env or {})}
    gcs = f"{address(head)}:{RAY_PORT}"
    started = bed.run(head, [ray, "start", "--head", f"--node-ip-address={address(head)}", f"--port={RAY_PORT}",
                             "--num-cpus=0", "--include-dashboard=false", "--disable-usage-stats",
                             f"--temp-dir=/tmp/ray-{BRIDGE}"],
                      private=False, timeout_s=timeout_s, env={**base, **RAY_HEAD_ENV})
    if started.returncode != 0:
        raise RuntimeError(f"ray start --head on host {head}: {started.stdout[-2000:]}{started.stderr[-2000:]}")
    for i in workers:
        joined = bed.run(i, [ray, "start", f"--address={gcs}", f"--node-ip-address={address(i)}", "--num-cpus=1",
                             "--disable-usage-stats"],
                         timeout_s=timeout_s, env={**base, **(worker_env or {}).get(i, {})})
        if joined.returncode != 0:
            raise RuntimeError(f"ray start on host {i}: {joined.stdout[-2000:]}{joined.stderr[-2000:]}")
    wait_nodes(bed, head, 1 + len(workers), timeout_s)
    return gcs


def wait_nodes(bed: Bed, head: int, nodes: int, timeout_s: float = 120) -> None:
    """Wait until the cluster whose head is on host `head` has exactly `nodes` live nodes."""
    code = ("import ray,sys; ray.init(address=sys.argv[1], logging_level=40, log_to_driver=False); "
            "print(len([n for n in ray.nodes() if n['Alive']]))")
    deadline = time.monotonic() + timeout_s
    alive = ""
    while time.monotonic() < deadline:
        done = bed.run(head, [sys.executable, "-c", code, f"{address(head)}:{RAY_PORT}"], private=False)
        alive = done.stdout.strip()
        if alive == str(nodes):
            return
        time.sleep(1)
    raise RuntimeError(f"the Ray cluster has {alive or 'no'} live nodes after {timeout_s:.0f} s, not {nodes}")


def _tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TAP | _IFF_NO_PI))
    return fd


class Wire:
    """Two TAP devices, `a` on the bridge and `b` in the host's namespace, joined in user space:
    each frame is passed on after its direction's delay (± jitter, uniform), or dropped with
    probability `loss`. The settings are re-read from `control` (JSON) on SIGUSR1."""

    def __init__(self, a: str, b: str, control: Path) -> None:
        self.fds = (_tap(a), _tap(b))
        self.control = control
        self.delay_s = (0.0, 0.0)  # a -> b (what the host receives), b -> a (what it sends)
        self.jitter_s = 0.0
        self.loss = 0.0
        self.rng = random.Random(0)

    def reload(self) -> None:
        try:
            c = json.loads(self.control.read_text())
        except (OSError, ValueError):
            return
        self.delay_s = (float(c.get("back_ms", 0)) / 1000, float(c.get("out_ms", 0)) / 1000)
        self.jitter_s = float(c.get("jitter_ms", 0)) / 1000
        self.loss = float(c.get("loss", 0))

    def _pass(self, src: int) -> None:
        loop = asyncio.get_running_loop()
        dst = self.fds[1 - src]
        while True:
            try:
                frame = os.read(self.fds[src], 65536)
            except BlockingIOError:
                return
            if self.loss and self.rng.random() < self.loss:
                continue
            delay = self.delay_s[src] + (self.rng.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0)
            if delay <= 0:
                _write(dst, frame)
            else:
                loop.call_later(delay, _write, dst, frame)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGUSR1, self.reload)
        for src in (0, 1):
            loop.add_reader(self.fds[src], self._pass, src)
        print("ready", flush=True)
        await asyncio.Event().wait()


def _write(fd: int, frame: bytes) -> None:
    try:
        os.write(fd, frame)
    except OSError:  # the device is down or gone: as a cable, the frame is lost
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="make the hosts (after removing any left over)")
    up.add_argument("--hosts", type=int, default=4)
    up.add_argument("--clock", action="append", default=[], metavar="I=SECONDS",
                    help="host I's monotonic clock runs SECONDS ahead (repeatable)")
    up.add_argument("--wire", action="append", type=int, default=[], metavar="I",
                    help="host I's link is a userspace wire that can be delayed (repeatable)")
    up.add_argument("--ray", type=lambda v: [int(i) for i in v.split(",")], default=[], metavar="I,J,...",
                    help="start a Ray head on host 0 and a Ray worker node on each of these hosts")
    run = sub.add_parser("exec", help="run a command on host I (private /tmp, its clock)")
    run.add_argument("host", type=int)
    run.add_argument("argv", nargs=argparse.REMAINDER)
    sub.add_parser("down", help="remove every host, link and wire")
    wire = sub.add_parser("wire", help=argparse.SUPPRESS)
    wire.add_argument("a")
    wire.add_argument("b")
    wire.add_argument("--control", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "wire":
        w = Wire(args.a, args.b, args.control)
        asyncio.run(w.serve())
        return
    if args.command == "down":
        down()
        return
    reason = unavailable()
    if reason:
        sys.exit(f"netns_hosts: {reason}")
    if args.command == "up":
        clocks = {int(i): int(s) for i, s in (c.split("=") for c in args.clock)}
        bed = Bed(args.hosts, clocks, args.wire, state=_CLI_STATE)
        bed.up()
        (_CLI_STATE / "bed.json").write_text(json.dumps({"hosts": args.hosts, "clocks": clocks}))
        for h in bed.hosts:
            print(f"host {h.index}: {h.ns} {h.address}" + (f" clock +{h.clock_offset_s} s" if h.clock_offset_s else "")
                  + (" (wire)" if h.wired else ""))
        if args.ray:
            print(f"Ray: load.ray_address {start_ray(bed, 0, args.ray)}; run the coordinator on host 0: "
                  f"{Path(__file__).name} exec 0 -- passport run ...")
        if args.wire:
            print("the wires run as long as this machine does; `down` stops them", file=sys.stderr)
        return
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        made = json.loads((_CLI_STATE / "bed.json").read_text())
    except (OSError, ValueError):
        sys.exit("netns_hosts: no hosts are up: run `up` first")
    bed = Bed(made["hosts"], {int(i): s for i, s in made["clocks"].items()})
    wrapped = bed.argv(args.host, argv, private=args.host != 0)  # host 0 shares /tmp with the Ray head
    os.execvp(wrapped[0], wrapped)


if __name__ == "__main__":
    main()
