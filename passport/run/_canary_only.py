"""`passport canary`: only the canary suite, for release gates and for recording references.

Against a spec (launching its engine if it declares one) or a bare endpoint. Writes
`<out>/<suite>-canary-<UTC>-<id>/canaries.parquet`; `record` rewrites the suite's exact-output
references from this (trusted) endpoint into a new suite file.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from canaries import CaseResult, Suite, record_suite
from harness import EngineLauncher, engines
from passport.audit import CanaryFigures
from passport.model import RunSpec
from passport.run._canaries import canary_info, load_declared_suite, run_canaries
from passport.run._disk import make_run_folder
from passport.run._endpoint import access, auth_headers, engine_launcher, model_of

__all__ = ["CanaryOutcome", "run_canary_command"]


@dataclass(frozen=True)
class CanaryOutcome:
    folder: Path
    suite: Suite
    results: list[CaseResult]
    info: CanaryFigures


def run_canary_command(spec: RunSpec, suite_name: str, out_root: Path, record: Path | None = None,
                       status: Callable[[str], None] | None = None) -> CanaryOutcome:
    """Run the suite against the spec's endpoint (or launched engine); see the module docstring."""
    say = status or (lambda _msg: None)
    suite = load_declared_suite(suite_name, spec.endpoint.api)
    headers = auth_headers(spec)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(out_root) / f"{suite.suite}-canary-{stamp}-{uuid.uuid4().hex[:8]}"
    make_run_folder(folder)
    launcher: EngineLauncher | None = None
    try:
        if spec.engine is not None:
            launcher = engine_launcher(spec, folder / "engine.log")
            say(f"starting the engine: {' '.join(launcher.command)}")
            launcher.start()
        way = access(spec, headers, launcher)
        with way.control() as control:
            cards = control.models()
            model = model_of(spec, cards, way.base_url)
        engine = next((engines.engine_of_card(c) for c in cards if c.get("id") == model), None)
        counted = iter(range(1, len(suite.cases) + 1))  # progress only: the CLI prints the verdicts
        results = run_canaries(suite, way, model, spec.endpoint.api, time.perf_counter_ns(),
                               on_case=lambda r: say(f"case {next(counted)}/{len(suite.cases)}: {r.case_id}"),
                               engine=engine)
    finally:
        if launcher is not None:
            launcher.stop()
    info = canary_info(suite, results, forced=False, folder=folder)
    if record is not None:
        record.write_text(record_suite(suite, results).to_yaml())
    return CanaryOutcome(folder, suite, results, info)
