"""`passport sweep SPEC`: a series of load levels, one passport each, and a summary that says
where the engine stops meeting its SLO (the knee) and where it saturates (`passport.judge`).

Levels are request rates (open loop at `load.pattern`) or concurrencies (closed loop), declared
or automatic:
- rate, auto: a closed-loop probe at `auto.probe_concurrency` measures the saturation rate R;
  the levels are `auto.fractions` of R (by default 0.25 R ... 1.1 R).
- concurrency, auto: `auto.start`, then times `auto.factor` per level, until the throughput
  stops growing (saturation confirmed) or `auto.max_levels`.

Each level is an ordinary run (its own folder, passport and verdict) of the spec with only the
load changed (and, by default, the workload seed: `fresh_prompts`, so no level finds the
previous level's prompts in the engine's prompt cache); a launched engine is started once and
shared by every level. After each level the declared over-saturation rule
(`sweep.stop_when`) is checked; when it holds, the sweep stops and says which rule stopped it and
which levels were not run. A rate level stops itself within seconds once the server plainly cannot
serve it (`load.stop_when_saturated`, on unless the spec sets it false): its verdict is SATURATED,
the sweep's saturation is taken from it, and the higher levels are not run.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness import EngineLauncher, write_new
from passport._errors import PassportError, SpecError
from passport.judge import (
    SWEEP_FILE,
    SWEEP_VERSION,
    LevelResult,
    SweepOutcome,
    auto_concurrency,
    knee,
    saturation,
    stop_reason,
    summarize_level,
)
from passport.model import Override, RunSpec, SweepSpec, parse_spec
from passport.report import sweep_blocks, write_reports
from passport.run._endpoint import engine_launcher
from passport.run._execute import execute
from passport.run._stages import ProgressFactory

__all__ = ["run_sweep"]


def _level_raw(raw: dict[str, Any], spec: RunSpec, vary: str, level: float, name: str,
               number: int) -> dict[str, Any]:
    """The spec as written, with only the load, the name and (with fresh_prompts) the workload
    seed changed for level `number` (0: the probe)."""
    out = copy.deepcopy(raw)
    out.pop("sweep", None)
    out["name"] = name
    if (spec.sweep or SweepSpec()).fresh_prompts:
        base = spec.workload.seed if spec.workload.seed is not None else spec.load.seed
        out["workload"] = {**(out.get("workload") or {}), "seed": base + number}
    load = dict(out.get("load") or {})
    sweep = spec.sweep or SweepSpec()
    if vary == "concurrency" or math.isinf(level):
        # inf: every request due at once, as vLLM's --request-rate inf: a closed loop of the
        # declared cap, or of every measured request
        users = level if vary == "concurrency" else (spec.load.concurrency or spec.load.measure.requests)
        if users is None:
            raise SpecError("sweep level inf sends every request at once: set load.concurrency (the users) or "
                            "load.measure.requests (all of them at once)")
        load["pattern"] = "closed"
        load["concurrency"] = int(users)
        load.pop("rate_per_s", None)
        load.pop("stop_when_saturated", None)  # a closed loop cannot over-saturate
    else:
        load["pattern"] = sweep.arrival or (spec.load.pattern if spec.load.open_loop else "poisson")
        load["rate_per_s"] = float(level)
        load.setdefault("stop_when_saturated", True)  # a level past saturation stops within seconds
    out["load"] = load
    return out


def _position(done: int, planned: int, started: float) -> str:
    """' (level 3 of 5; about 2 min left at the pace so far)' for the status line."""
    if not done:
        return f" (level 1 of {planned})"
    left_s = (time.monotonic() - started) / done * (planned - done)
    left = f"{left_s / 60:.0f} min" if left_s >= 90 else f"{left_s:.0f} s"
    return f" (level {done + 1} of {planned}; about {left} left at the pace so far, more if higher loads run longer)"


# The workload seed offset of the synchronous probe (the saturation probe is 0, levels 1, 2, ...):
# distinct from every level's, so no level finds its prompts in the engine's cache.
_SYNCHRONOUS_PROBE = 1000


def _probed(probe: LevelResult, which: str, folder: Path) -> float:
    """The probe's throughput; PassportError when it completed nothing."""
    if not probe.throughput_rps:
        raise PassportError(f"the {which} probe completed no request ({probe.verdict}); see "
                            f"{folder / 'levels' / probe.run}")
    return probe.throughput_rps


def run_sweep(
    spec: RunSpec,
    raw: dict[str, Any],
    overrides: list[Override],
    out_root: Path,
    progress: ProgressFactory | None = None,
    status: Callable[[str], None] | None = None,
) -> SweepOutcome:
    """Run every level (see the module docstring) and write the sweep folder."""
    say = status or (lambda _msg: None)
    sweep = spec.sweep or SweepSpec()
    vary = sweep.vary
    if vary == "concurrency" and isinstance(sweep.levels, list) and any(v != int(v) for v in sweep.levels):
        raise SpecError("sweep.levels for vary: concurrency must be whole numbers, e.g. [1, 2, 4, 8]")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = Path(out_root) / f"{spec.name}-sweep-{stamp}-{uuid.uuid4().hex[:8]}"
    (folder / "levels").mkdir(parents=True)
    outcome = SweepOutcome(folder=folder, vary=vary, has_slo=bool(spec.slo))
    launcher: EngineLauncher | None = None
    if spec.engine is not None:
        launcher = engine_launcher(spec, folder / "engine.log")
        say(f"starting the engine once for every level: {' '.join(launcher.command)}")
        launcher.start()

    def run_level(level: float, name: str, vary_as: str, number: int, position: str = "") -> LevelResult:
        level_raw = _level_raw(raw, spec, vary_as, level, name, number)
        level_spec = parse_spec(level_raw, f"{name} (sweep level)")
        say(f"sweep level {name}{position}: {level_spec.load}")
        result = execute(level_spec, level_raw, overrides, folder / "levels", progress=progress, status=status,
                         shared_engine=launcher)
        return summarize_level(level, result.folder, result.passport)

    try:
        if sweep.levels != "auto":
            planned = list(sweep.levels)
        elif vary == "rate":
            low_rps = 0.0
            if sweep.auto.interpolate:
                synchronous = run_level(1.0, f"{spec.name}-probe-c1", "concurrency", _SYNCHRONOUS_PROBE)
                outcome.synchronous_probe = synchronous
                low_rps = _probed(synchronous, "synchronous", folder)
            probe_c = sweep.auto.probe_concurrency
            probe = run_level(float(probe_c), f"{spec.name}-probe-c{probe_c}", "concurrency", 0)
            outcome.probe = probe
            high_rps = _probed(probe, "saturation", folder)
            if sweep.auto.interpolate:
                # guidellm's sweep: evenly from the synchronous rate to the saturation rate, the first left out
                steps = sweep.auto.interpolate
                planned = sorted({round(low_rps + (high_rps - low_rps) * (i + 1) / steps, 3) for i in range(steps)})
            else:
                planned = [round(f * high_rps, 3) for f in sweep.auto.fractions]
            say(f"probe: saturation near {high_rps:.3f} req/s; levels {planned}")
        else:
            planned = auto_concurrency(sweep)
        started = time.monotonic()
        for i, level in enumerate(planned):
            tag = f"c{level:g}" if vary == "concurrency" else f"r{level:g}"  # r inf: every request at once
            result = run_level(level, f"{spec.name}-{tag}", vary, i + 1, _position(i, len(planned), started))
            outcome.levels.append(result)
            reason = stop_reason(sweep, vary, result)
            if reason is None and sweep.levels == "auto" and vary == "concurrency":
                saturated, _ = saturation(sweep, vary, outcome.levels)
                if saturated is not None:
                    reason = f"saturation confirmed: concurrency {saturated:g} is where throughput stops growing"
            if reason is not None and i + 1 < len(planned):
                outcome.stop_reason = reason
                outcome.not_run = planned[i + 1:]
                break
            if reason is not None and not result.complete:
                outcome.stop_reason = reason
    except KeyboardInterrupt:
        outcome.stop_reason = "interrupted"
        raise
    finally:
        if launcher is not None:
            launcher.stop()
        outcome.saturation, outcome.saturation_note = saturation(sweep, vary, outcome.levels)
        outcome.knee, outcome.knee_note = knee(outcome.levels, outcome.has_slo)
        _write(outcome, spec)
    return outcome


def _level_json(lv: LevelResult) -> dict[str, Any]:
    """A level as sweep.json keeps it: its fields, its throughput's 95 % interval and its SLO call."""
    return {**asdict(lv), "load": "inf" if math.isinf(lv.load) else lv.load,
            "throughput_interval": lv.throughput_interval, "slo_call": lv.slo_call}


def _write(outcome: SweepOutcome, spec: RunSpec) -> None:
    data = {
        "sweep_version": SWEEP_VERSION, "name": spec.name,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "vary": outcome.vary, "slo": spec.slo,
        "sweep": (spec.sweep or SweepSpec()).model_dump(mode="json"),
        "probe": _level_json(outcome.probe) if outcome.probe else None,
        "synchronous_probe": _level_json(outcome.synchronous_probe) if outcome.synchronous_probe else None,
        "levels": [_level_json(lv) for lv in outcome.levels],
        "not_run": ["inf" if math.isinf(x) else x for x in outcome.not_run],
        "knee": outcome.knee, "knee_note": outcome.knee_note,
        "saturation": outcome.saturation, "saturation_note": outcome.saturation_note,
        "stopped_early": outcome.stop_reason,
    }
    write_new(outcome.folder / SWEEP_FILE, (json.dumps(data, indent=2) + "\n").encode())
    write_reports(outcome.folder, f"Sweep: {spec.name}", sweep_blocks(outcome, spec))
