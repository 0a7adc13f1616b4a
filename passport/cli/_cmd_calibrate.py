"""`passport calibrate`: what this client paces on this machine (the calibration every run's
headroom and `load.workers: auto` read), measured or read from the cache."""

from __future__ import annotations

import argparse
from typing import Any

from passport.cli._exit import ExitCode

__all__ = ["add", "main"]


def add(sub: Any, epilog: str) -> None:
    calibrate = sub.add_parser(
        "calibrate", help="measure what this client paces here (CPU per request and per chunk; cached)",
        description="Measure this client's CPU cost on this machine, the timed phase's own pipeline (pacer, HTTP, "
                    "recorder, Parquet writers) against the simulated engine: microseconds per request and per "
                    "streamed chunk, and the requests/s one worker paces with dispatch lag p99 within 1 ms. Every "
                    "run reads it (measuring it first where the cache has none for this harness and machine) "
                    "for results.client.headroom and load.workers: auto.",
        epilog="examples:\n  passport calibrate\n  passport calibrate --fresh --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    calibrate.add_argument("--fresh", action="store_true", help="measure again even when a cached one is valid")
    calibrate.add_argument("--json", action="store_true", help="print the calibration as JSON")


def main(args: argparse.Namespace) -> ExitCode:
    import json

    from passport.run._calibration import client_calibration

    calibration = client_calibration(fresh=args.fresh)
    if args.json:
        print(json.dumps(calibration.to_json(), indent=2))
        return ExitCode.OK
    print(f"{calibration.cpu_us_per_request:.0f} us CPU per request + {calibration.cpu_us_per_chunk:.1f} us per "
          f"streamed chunk ({calibration.how}, {calibration.measured_utc}, key {calibration.key})")
    for chunks in (3, 66, 258):
        print(f"  one worker paces ~{calibration.ceiling_requests_per_s(chunks):,.0f} requests/s at {chunks} chunks "
              f"each (within {calibration.pacing_cpu_share:.0%} of a core)")
    return ExitCode.OK
