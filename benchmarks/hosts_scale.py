"""Many streams from workers on several hosts: benchmarks/streams.py's closed loop of S users
(10-token answers one `--itl-ms` apart, TTFT `--ttft-ms`, both jittered; S requests of warm-up,
S measured), sent once by W Ray actors on W namespaced hosts (scripts/netns_hosts.py: the
coordinator and the Ray head on host 0, one Ray worker node per host, the engine on its own host
as `--sims` simulator processes sharing one address, whose /metrics then covers one of them:
server telemetry is off) and once, as the baseline measured in the
same invocation, by W forked workers on the coordinator's host against the same engine.

Prints per run: the verdict, client_not_bound and dispatch_lag, TTFT p50 against the scripted,
the coordinator's peak RSS (wait4), each host's actor peak RSS and the coordinator's time to
write and merge the shards (`protocol.workers.memory` and `merge_s`), and the wall time.

    .venv/bin/python benchmarks/hosts_scale.py [--streams 10000] [--hosts 3] [--sims 2]

Needs root and network namespaces (as the multi-host tests); every host shares this machine's
cores, so the figures are of the client's costs and of Ray's, not of a larger machine.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.streams import passport_of, passport_run, streams_spec  # noqa: E402
from scripts import netns_hosts as hosts  # noqa: E402

HEAD = 0


def _spec(url: str, streams: int, workers: int, ray_address: str | None, sims: int) -> dict[str, Any]:
    """benchmarks/streams.py's closed loop, from Ray actors where `ray_address` is given."""
    spec = streams_spec(url, streams, workers)
    spec["name"] = f"hosts-{streams}"
    if ray_address:
        spec["load"] |= {"backend": "ray", "ray_address": ray_address}
    # Several simulator processes behind one port are a pool: one /metrics scrape reaches one of
    # them, whose counters cover its share only (server_counters would fail on that, rightly)
    spec["telemetry"] = {"metrics": "off"} if sims > 1 else {}
    return spec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=10000)
    parser.add_argument("--hosts", type=int, default=3, help="worker hosts (one Ray actor each)")
    parser.add_argument("--sims", type=int, default=2, help="simulator processes behind the engine's address")
    parser.add_argument("--itl-ms", type=float, default=1000.0)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--jitter-ms", type=float, default=200.0)
    args = parser.parse_args()
    reason = hosts.unavailable()
    if reason:
        sys.exit(f"hosts_scale: {reason}")
    workers = list(range(1, args.hosts + 1))
    engine = args.hosts + 1
    bed = hosts.Bed(engine + 1).up()
    try:
        address = hosts.start_ray(bed, HEAD, workers)
        for _ in range(args.sims):
            bed.start(engine, [sys.executable, "-m", "harness.simulator", "--host", hosts.address(engine), "--port",
                               "8000", "--reuse-port", "--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms),
                               "--ttft-jitter-ms", str(args.jitter_ms), "--itl-jitter-ms", str(args.jitter_ms)],
                      cwd=ROOT)
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection((hosts.address(engine), 8000), timeout=1).close()
                break
            if time.monotonic() > deadline:
                sys.exit("hosts_scale: the simulators did not start")
            time.sleep(0.2)
        url = f"http://{hosts.address(engine)}:8000/v1"
        print(f"{args.streams:,} streams, {args.hosts} workers, {args.sims} simulator processes, "
              f"ITL {args.itl_ms:g} ms, TTFT {args.ttft_ms:g} ms, jitter {args.jitter_ms:g} ms")
        with tempfile.TemporaryDirectory() as tmp:
            for name, ray in (("forked on host 0", None), (f"Ray on {args.hosts} hosts", address)):
                spec = Path(tmp) / f"{len(name)}.yaml"
                spec.write_text(yaml.safe_dump(_spec(url, args.streams, args.hosts, ray, args.sims)))
                out = Path(tmp) / f"out{len(name)}"
                # on host 0, from the spec's folder (Ray puts the driver's folder on its workers' paths)
                code, wall_s, rss_mib = passport_run(spec, out, cwd=spec.parent,
                                                     around=lambda argv: bed.argv(HEAD, argv, private=False))
                passport = passport_of(out)
                if passport is None:
                    print(f"{name}: no passport (exit {code})")
                    continue
                counts = passport["validity"]["counts"]
                ttft = passport["results"]["metrics"]["ttft.any"]["p50"] or float("nan")
                w = passport["protocol"].get("workers") or {}
                memory = ", ".join(f"{m['host']} {m['peak_rss_mib']:.0f}" for m in w.get("memory", []))
                print(f"{name}: {passport['verdict']} (exit {code}) in {wall_s:.0f} s; {counts.get('succeeded')} of "
                      f"{counts.get('measured')} succeeded; TTFT p50 {ttft * 1e3:.0f} ms; coordinator peak RSS "
                      f"{rss_mib:.0f} MiB" + (f"; actors' peak RSS MiB: {memory}; merge {w['merge_s']:.2f} s"
                                               if memory else ""))
                for r in passport["validity"]["rules"]:  # the client's rules, and whatever did not pass
                    if r["name"] in ("client_not_bound", "dispatch_lag", "clock_offsets") or r["status"] == "FAIL":
                        print(f"    {r['name']} {r['status']}: {r['message']}")
    finally:
        bed.down()


if __name__ == "__main__":
    main()
