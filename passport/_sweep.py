"""`passport sweep SPEC`: a series of load levels, one passport each, and a summary that says
where the engine stops meeting its SLO (the knee) and where it saturates.

Levels are request rates (open loop at `load.pattern`) or concurrencies (closed loop), declared
or automatic:
- rate, auto: a closed-loop probe at `auto.probe_concurrency` measures the saturation rate R;
  the levels are `auto.fractions` of R (by default 0.25 R ... 1.1 R).
- concurrency, auto: `auto.start`, then times `auto.factor` per level, until the throughput
  stops growing (saturation confirmed) or `auto.max_levels`.

Each level is an ordinary run (its own folder, passport and verdict) of the spec with only the
load changed (and, by default, the workload seed: `fresh_prompts`, so no level finds the
previous level's prompts in the engine's prompt cache); a launched engine is started once and
shared by every level. After each level the
declared over-saturation rule (`sweep.stop_when`) is checked; when it holds, the sweep stops and
says which rule stopped it and which levels were not run.

Definitions (all from the levels' passports):
- saturation, rate sweeps: the first level whose completions/s fall below
  `saturation_fraction` of the offered rate; concurrency sweeps: the first level after which
  one more level adds less than `saturation_gain` of throughput.
- knee: the highest level such that it and every lower level met the declared SLO
  (`slo:` in the spec); without an SLO there is no knee, and the summary says so.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import EngineLauncher
from passport._doc import Block, Bullets, Heading, Image, Para, Table
from passport._errors import PassportError, SpecError
from passport._model import Override, Passport
from passport._plots import SweepPoint, sweep_curve
from passport._report import ms, write_reports
from passport._run import ProgressFactory, engine_launcher, execute
from passport._spec import RunSpec, SweepSpec, parse_spec
from passport._units import parse_duration_s

__all__ = ["LevelResult", "SweepOutcome", "run_sweep", "summary_lines", "sweep_blocks", "SWEEP_VERSION"]

SWEEP_VERSION = 1


@dataclass(frozen=True)
class LevelResult:
    """One load level's run, summarized from its passport."""

    load: float
    run: str
    verdict: str
    complete: bool
    throughput_rps: float | None
    output_tokens_per_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    itl_p50_s: float | None
    e2e_p99_s: float | None
    error_rate: float | None
    achieved_fraction: float | None
    slo_met: bool | None
    goodput_rps: float | None


@dataclass
class SweepOutcome:
    folder: Path
    vary: str
    has_slo: bool
    levels: list[LevelResult] = field(default_factory=list)
    not_run: list[float] = field(default_factory=list)
    probe: LevelResult | None = None
    knee: float | None = None
    knee_note: str = ""
    saturation: float | None = None
    saturation_note: str = ""
    stop_reason: str | None = None

    @property
    def exit_code(self) -> int:
        """0: every level ran to completion and (with an SLO) a knee was found; else 1."""
        if not self.levels or any(not lv.complete for lv in self.levels):
            return 1
        return 1 if self.has_slo and self.knee is None else 0


def _summarize(load: float, folder: Path, p: Passport) -> LevelResult:
    m = p.results.metrics
    counts = p.validity.counts

    def get(metric: str, stat: str) -> float | None:
        s = m.get(metric)
        value = getattr(s, stat) if s is not None else None
        return None if value is None else float(value)

    measured, succeeded = counts.get("measured") or 0, counts.get("succeeded") or 0
    achieved = next((r.measured for r in p.validity.rules if r.name == "achieved_rate"), None)
    return LevelResult(
        load=load, run=folder.name, verdict=p.verdict, complete=p.validity.complete,
        throughput_rps=get("throughput.requests_per_s", "mean"),
        output_tokens_per_s=get("throughput.output_tokens_per_s", "mean"),
        ttft_p50_s=get("ttft.any", "p50"), ttft_p99_s=get("ttft.any", "p99"), itl_p50_s=get("itl.chunk", "p50"),
        e2e_p99_s=get("e2e", "p99"), error_rate=(measured - succeeded) / measured if measured else None,
        achieved_fraction=float(achieved) if isinstance(achieved, (int, float)) else None,
        slo_met=None if p.results.slo is None else p.results.slo.met,
        goodput_rps=get("goodput.requests_per_s", "mean"),
    )


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
    if vary == "concurrency":
        load["pattern"] = "closed"
        load["concurrency"] = int(level)
        load.pop("rate_per_s", None)
    else:
        load["pattern"] = spec.load.pattern if spec.load.open_loop else "poisson"
        load["rate_per_s"] = float(level)
    out["load"] = load
    return out


def _stop_reason(sweep: SweepSpec, vary: str, level: LevelResult) -> str | None:
    rule = sweep.stop_when
    if not level.complete:
        return f"level {level.load:g} did not complete ({level.verdict})"
    if vary == "rate" and rule.achieved_fraction_below is not None and level.achieved_fraction is not None \
            and level.achieved_fraction < rule.achieved_fraction_below:
        return (f"over-saturated at {level.load:g}: completions came at {level.achieved_fraction:.0%} of the "
                f"offered rate (sweep.stop_when.achieved_fraction_below: {rule.achieved_fraction_below})")
    if rule.error_rate_above is not None and level.error_rate is not None and level.error_rate > rule.error_rate_above:
        return (f"over-saturated at {level.load:g}: error rate {level.error_rate:.1%} "
                f"(sweep.stop_when.error_rate_above: {rule.error_rate_above})")
    if rule.ttft_p50_above is not None and level.ttft_p50_s is not None \
            and level.ttft_p50_s > parse_duration_s(rule.ttft_p50_above):
        return (f"over-saturated at {level.load:g}: TTFT p50 {ms(level.ttft_p50_s)} ms "
                f"(sweep.stop_when.ttft_p50_above: {rule.ttft_p50_above})")
    return None


def _saturation(sweep: SweepSpec, vary: str, levels: list[LevelResult]) -> tuple[float | None, str]:
    if vary == "rate":
        for lv in levels:
            if lv.achieved_fraction is not None and lv.achieved_fraction < sweep.saturation_fraction:
                return lv.load, (f"at {lv.load:g} req/s offered, completions came at {lv.achieved_fraction:.0%} "
                                 f"of the offered rate (< {sweep.saturation_fraction:.0%})")
        return None, "every level kept up with its offered rate"
    for a, b in zip(levels, levels[1:]):
        if a.throughput_rps and b.throughput_rps is not None and b.throughput_rps < a.throughput_rps * (
                1 + sweep.saturation_gain):
            return a.load, (f"going from concurrency {a.load:g} to {b.load:g} raised throughput from "
                            f"{a.throughput_rps:.3f} to {b.throughput_rps:.3f} req/s "
                            f"(< {sweep.saturation_gain:.0%} more)")
    return None, "throughput still grew at the last level"


def _knee(levels: list[LevelResult], has_slo: bool) -> tuple[float | None, str]:
    if not has_slo:
        return None, "no SLO declared (add `slo:` to the spec to find the knee)"
    knee = None
    for lv in levels:
        if not lv.slo_met:
            break
        knee = lv.load
    if knee is None:
        return None, "no level met the SLO, not even the lowest"
    later = [lv.load for lv in levels if lv.slo_met and lv.load > knee]
    note = "the highest load at which it and every lower level met the SLO"
    if later:
        note += f"; higher levels {', '.join(f'{x:g}' for x in later)} met it again (noise or a non-monotonic engine)"
    return knee, note


def _auto_concurrency(sweep: SweepSpec) -> list[float]:
    levels: list[float] = []
    value = sweep.auto.start
    while len(levels) < sweep.auto.max_levels:
        rounded = float(max(1, round(value)))
        if rounded not in levels:
            levels.append(rounded)
        value *= sweep.auto.factor
    return levels


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

    def run_level(level: float, name: str, vary_as: str, number: int) -> LevelResult:
        level_raw = _level_raw(raw, spec, vary_as, level, name, number)
        level_spec = parse_spec(level_raw, f"{name} (sweep level)")
        say(f"sweep level {name}: {level_spec.load}")
        result = execute(level_spec, level_raw, overrides, folder / "levels", progress=progress, status=status,
                         shared_engine=launcher)
        return _summarize(level, result.folder, result.passport)

    try:
        if sweep.levels != "auto":
            planned = list(sweep.levels)
        elif vary == "rate":
            probe_c = sweep.auto.probe_concurrency
            probe = run_level(float(probe_c), f"{spec.name}-probe-c{probe_c}", "concurrency", 0)
            outcome.probe = probe
            if not probe.throughput_rps:
                raise PassportError(f"the saturation probe completed no request ({probe.verdict}); "
                                    f"see {folder / 'levels' / probe.run}")
            planned = [round(f * probe.throughput_rps, 3) for f in sweep.auto.fractions]
            say(f"probe: saturation near {probe.throughput_rps:.3f} req/s; levels {planned}")
        else:
            planned = _auto_concurrency(sweep)
        for i, level in enumerate(planned):
            tag = f"c{level:g}" if vary == "concurrency" else f"r{level:g}"
            result = run_level(level, f"{spec.name}-{tag}", vary, i + 1)
            outcome.levels.append(result)
            reason = _stop_reason(sweep, vary, result)
            if reason is None and sweep.levels == "auto" and vary == "concurrency":
                saturated, _ = _saturation(sweep, vary, outcome.levels)
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
        outcome.saturation, outcome.saturation_note = _saturation(sweep, vary, outcome.levels)
        outcome.knee, outcome.knee_note = _knee(outcome.levels, outcome.has_slo)
        _write(outcome, spec)
    return outcome


def _write(outcome: SweepOutcome, spec: RunSpec) -> None:
    data = {
        "sweep_version": SWEEP_VERSION, "name": spec.name,
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "vary": outcome.vary, "slo": spec.slo, "sweep": (spec.sweep or SweepSpec()).model_dump(mode="json"),
        "probe": asdict(outcome.probe) if outcome.probe else None,
        "levels": [asdict(lv) for lv in outcome.levels], "not_run": outcome.not_run,
        "knee": outcome.knee, "knee_note": outcome.knee_note,
        "saturation": outcome.saturation, "saturation_note": outcome.saturation_note,
        "stopped_early": outcome.stop_reason,
    }
    (outcome.folder / "sweep.json").write_text(json.dumps(data, indent=2) + "\n")
    write_reports(outcome.folder, f"Sweep: {spec.name}", sweep_blocks(outcome, spec))


def _load_text(vary: str, load: float) -> str:
    return f"{load:g} req/s" if vary == "rate" else f"concurrency {load:g}"


def summary_lines(outcome: SweepOutcome) -> list[str]:
    """The sweep's verdict in a few lines: knee, saturation, early stop."""
    lines = [f"knee: {_load_text(outcome.vary, outcome.knee)} ({outcome.knee_note})" if outcome.knee is not None
             else f"knee: none ({outcome.knee_note})",
             f"saturation: {_load_text(outcome.vary, outcome.saturation)} ({outcome.saturation_note})"
             if outcome.saturation is not None else f"saturation: not reached ({outcome.saturation_note})"]
    if outcome.stop_reason:
        lines.append(f"stopped early: {outcome.stop_reason}"
                     + (f"; not run: {', '.join(f'{x:g}' for x in outcome.not_run)}" if outcome.not_run else ""))
    return lines


def _row(lv: LevelResult) -> list[str]:
    def num(x: float | None, digits: int = 3) -> str:
        return "—" if x is None else f"{x:.{digits}f}"

    slo = "—" if lv.slo_met is None else ("met" if lv.slo_met else "missed")
    return [f"{lv.load:g}", lv.verdict, num(lv.throughput_rps), num(lv.output_tokens_per_s, 1), ms(lv.ttft_p50_s),
            ms(lv.ttft_p99_s), ms(lv.itl_p50_s), ms(lv.e2e_p99_s),
            "—" if lv.error_rate is None else f"{lv.error_rate:.1%}",
            "—" if lv.achieved_fraction is None else f"{lv.achieved_fraction:.0%}", slo, num(lv.goodput_rps),
            f"`{lv.run}`"]


def sweep_blocks(outcome: SweepOutcome, spec: RunSpec) -> list[Block]:
    """The sweep report: knee and saturation first, the curve, then one row per level."""
    load_label = "offered rate (requests/s)" if outcome.vary == "rate" else "concurrency (requests in flight)"
    points = [SweepPoint(lv.load, lv.throughput_rps, lv.ttft_p50_s, lv.ttft_p99_s, lv.itl_p50_s, lv.slo_met)
              for lv in outcome.levels]
    blocks: list[Block] = [Para("**" + "**; **".join(summary_lines(outcome)) + "**")]
    if spec.slo:
        blocks.append(Para(f"SLO: {', '.join(f'`{k} <= {v}`' for k, v in spec.slo.items())}."))
    if outcome.levels:
        blocks.append(Image("sweep_curve.png", sweep_curve(points, load_label, outcome.knee, outcome.saturation),
                            "Latency against achieved throughput per level, and throughput by offered load."))
    blocks += [Heading("Levels"),
               Table(["load", "verdict", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                      "E2E p99 ms", "errors", "achieved", "SLO", "goodput req/s", "run folder (levels/)"],
                     [_row(lv) for lv in outcome.levels])]
    if outcome.probe is not None:
        blocks += [Heading("Saturation probe"),
                   Table(["concurrency", "verdict", "req/s", "out tok/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
                          "E2E p99 ms", "errors", "achieved", "SLO", "goodput req/s", "run folder (levels/)"],
                         [_row(outcome.probe)])]
    blocks += [Heading("Notes"), Bullets([
        "Each level is a complete run with its own passport under levels/; `passport verify` checks any of them.",
        ("Each level drew its own prompts (same length distributions, workload seed + level number), so the "
         "engine's prompt cache carried nothing from one level to the next."
         if (spec.sweep or SweepSpec()).fresh_prompts
         else "Every level sent the same prompts: later levels may hit the engine's prompt cache."),
        "A level past saturation is usually INVALID (its latencies include queueing): that is what the sweep is "
        "for, and its verdict is shown as is.",
    ])]
    return blocks
