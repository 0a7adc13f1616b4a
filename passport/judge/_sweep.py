"""Reading a sweep's levels: where the engine stops meeting its SLO (the knee), where it
saturates, and when a sweep should stop (the declared over-saturation rule).

Definitions (all from the levels' passports):
- saturation, rate sweeps: the first level whose completions/s fall below
  `saturation_fraction` of the offered rate; concurrency sweeps: the first level after which
  one more level adds less than `saturation_gain` of throughput.
- knee: the highest level such that it and every lower level met the declared SLO
  (`slo:` in the spec); without an SLO there is no knee, and the summary says so.

Running the levels is `passport.run.run_sweep`; the report is `passport.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from passport.audit import parse_duration_s
from passport.model import Passport, SweepSpec

__all__ = ["LevelResult", "SweepOutcome", "summarize_level", "stop_reason", "saturation", "knee",
           "auto_concurrency", "load_text", "SWEEP_VERSION"]

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
    tokens_per_s_per_user_p50: float | None = None


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
    def succeeded(self) -> bool:
        """Every level ran to completion and (with an SLO) a knee was found."""
        if not self.levels or any(not lv.complete for lv in self.levels):
            return False
        return not (self.has_slo and self.knee is None)


def summarize_level(load: float, folder: Path, p: Passport) -> LevelResult:
    counts, slo = p.validity.counts, p.results.get("slo")
    measured, succeeded = counts.get("measured") or 0, counts.get("succeeded") or 0
    achieved = next((r["measured"] for r in p.validity.rules if r["name"] == "achieved_rate"), None)
    return LevelResult(
        load=load, run=folder.name, verdict=p.verdict, complete=p.validity.complete,
        throughput_rps=p.figure("throughput.requests_per_s", "mean"),
        output_tokens_per_s=p.figure("throughput.output_tokens_per_s", "mean"),
        ttft_p50_s=p.figure("ttft.any", "p50"), ttft_p99_s=p.figure("ttft.any", "p99"),
        itl_p50_s=p.figure("itl.chunk", "p50"),
        e2e_p99_s=p.figure("e2e", "p99"), error_rate=(measured - succeeded) / measured if measured else None,
        achieved_fraction=float(achieved) if isinstance(achieved, (int, float)) else None,
        # an interrupted level measured part of its window: whether it met the SLO is unknown
        slo_met=None if slo is None or not p.validity.complete else slo["met"],
        goodput_rps=p.figure("goodput.requests_per_s", "mean"),
        tokens_per_s_per_user_p50=p.figure("tps.user", "p50"),
    )


def stop_reason(sweep: SweepSpec, vary: str, level: LevelResult) -> str | None:
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
        return (f"over-saturated at {level.load:g}: TTFT p50 {(level.ttft_p50_s * 1000):.2f} ms "
                f"(sweep.stop_when.ttft_p50_above: {rule.ttft_p50_above})")
    return None


def saturation(sweep: SweepSpec, vary: str, levels: list[LevelResult]) -> tuple[float | None, str]:
    """(the saturation level or None, why), from the complete levels only: an interrupted level
    measured part of its window, and a sweep with one complete level shows no trend."""
    done = [lv for lv in levels if lv.complete]
    cut = [lv.load for lv in levels if not lv.complete]
    unjudged = f" (level {', '.join(f'{x:g}' for x in cut)} did not complete and is left out)" if cut else ""
    if vary == "rate":
        for lv in done:
            if lv.achieved_fraction is not None and lv.achieved_fraction < sweep.saturation_fraction:
                return lv.load, (f"at {lv.load:g} req/s offered, completions came at {lv.achieved_fraction:.0%} "
                                 f"of the offered rate (< {sweep.saturation_fraction:.0%})")
        if not done:
            return None, "not judged: no level completed"
        return None, f"every complete level kept up with its offered rate{unjudged}"
    if len(done) < 2:
        return None, f"not judged: {len(done)} complete level{'s' if len(done) != 1 else ''}, a trend needs two" \
            + unjudged
    for a, b in zip(done, done[1:]):
        if a.throughput_rps and b.throughput_rps is not None and b.throughput_rps < a.throughput_rps * (
                1 + sweep.saturation_gain):
            change = b.throughput_rps / a.throughput_rps - 1
            moved = "lowered" if change < 0 else "raised"
            return a.load, (f"going from concurrency {a.load:g} to {b.load:g} {moved} throughput from "
                            f"{a.throughput_rps:.3f} to {b.throughput_rps:.3f} req/s ({change:+.1%}; saturation "
                            f"is a gain under {sweep.saturation_gain:.0%})")
    return None, f"throughput still grew at the last complete level ({done[-1].load:g}){unjudged}"


def knee(levels: list[LevelResult], has_slo: bool) -> tuple[float | None, str]:
    if not has_slo:
        return None, "no SLO declared (add `slo:` to the spec to find the knee)"
    knee = None
    unknown = None
    for lv in levels:
        if not lv.complete:
            unknown = lv.load
            break
        if not lv.slo_met:
            break
        knee = lv.load
    if knee is None:
        if unknown is not None:
            return None, f"not judged: level {unknown:g} did not complete, so whether it met the SLO is unknown"
        return None, "no level met the SLO, not even the lowest"
    later = [lv.load for lv in levels if lv.complete and lv.slo_met and lv.load > knee]
    note = "the highest load at which it and every lower level met the SLO"
    if unknown is not None:
        note += f"; level {unknown:g} did not complete, so the knee may lie higher"
    elif later:
        note += f"; higher levels {', '.join(f'{x:g}' for x in later)} met it again (noise or a non-monotonic engine)"
    return knee, note


def auto_concurrency(sweep: SweepSpec) -> list[float]:
    levels: list[float] = []
    value = sweep.auto.start
    while len(levels) < sweep.auto.max_levels:
        rounded = float(max(1, round(value)))
        if rounded not in levels:
            levels.append(rounded)
        value *= sweep.auto.factor
    return levels


def load_text(vary: str, load: float) -> str:
    return f"{load:g} req/s" if vary == "rate" else f"concurrency {load:g}"
