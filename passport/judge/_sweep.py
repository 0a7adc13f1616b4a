"""Reading a sweep's levels: where the engine stops meeting its SLO (the knee), where it
saturates, and when a sweep should stop (the declared over-saturation rule).

Definitions (all from the levels' passports and raw tables; the noise of each figure is
`_level_noise`'s: throughput over repetitions or time slices, an SLO target's share of requests
within its bound over time blocks). A point is *called* only where the 95 % interval lies wholly
on one side of the threshold; where it straddles it, the summary says so and by how much:
- saturation, rate sweeps: the first level whose completions/s fall clearly below
  `saturation_fraction` of the offered rate; concurrency sweeps: the first level after which
  one more level clearly adds less than `saturation_gain` of throughput (the gain's interval,
  from the difference of the two levels' estimates, Welch, wholly under the gain).
- knee: the highest level such that it and every lower level clearly met the declared SLO
  (`slo:` in the spec), each target's share within its bound at or above the share it needs.
  When the next level's call is unclear, the knee is that lower bound and says so; without an
  SLO there is no knee, and the summary says so.

Running the levels is `passport.run.run_sweep`; the report is `passport.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from passport.audit import parse_duration_s
from passport.judge._level_noise import TargetCall, interval_95, level_noise
from passport.judge._stats import Estimate, difference
from passport.model import Passport, SweepSpec

__all__ = ["LevelResult", "SweepOutcome", "TargetCall", "summarize_level", "stop_reason", "saturation", "knee",
           "auto_concurrency", "load_text", "SWEEP_VERSION"]

# 2: each level's throughput error and SLO calls; knee and saturation called only outside the noise
SWEEP_VERSION = 2


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
    repetitions: int = 1
    throughput_se: float | None = None  # the throughput's standard error (`_level_noise`)
    throughput_df: float | None = None
    throughput_basis: str = ""
    slo_targets: tuple[TargetCall, ...] = ()

    @property
    def throughput_interval(self) -> tuple[float, float] | None:
        """The 95 % interval of `throughput_rps`, where its error is known."""
        if self.throughput_rps is None or self.throughput_se is None or self.throughput_df is None:
            return None
        return interval_95(self.throughput_rps, self.throughput_se, self.throughput_df)

    @property
    def slo_call(self) -> str | None:
        """met (every target clearly met), missed (one clearly missed), unclear, or None (no SLO,
        or the level did not complete)."""
        if not self.slo_targets or not self.complete:
            return None
        calls = {t.call for t in self.slo_targets}
        return "missed" if "missed" in calls else "unclear" if "unclear" in calls else "met"


@dataclass
class SweepOutcome:
    folder: Path
    vary: str
    has_slo: bool
    levels: list[LevelResult] = field(default_factory=list)
    not_run: list[float] = field(default_factory=list)
    probe: LevelResult | None = None
    synchronous_probe: LevelResult | None = None  # auto.interpolate: the probe at concurrency 1
    knee: float | None = None
    knee_note: str = ""
    saturation: float | None = None
    saturation_note: str = ""
    stop_reason: str | None = None

    @property
    def succeeded(self) -> bool:
        """Every level ran to completion or stopped saturated, and (with an SLO) a knee was found."""
        if not self.levels or any(not lv.complete and lv.verdict != "SATURATED" for lv in self.levels):
            return False
        return not (self.has_slo and self.knee is None)


def summarize_level(load: float, folder: Path, p: Passport) -> LevelResult:
    """The level's figures from its passport, with their noise from its raw tables."""
    counts, slo = p.validity.counts, p.results.get("slo")
    noise = level_noise(folder, p)
    estimate: Estimate | None = noise.throughput
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
        repetitions=int((p.protocol.effective.get("load") or {}).get("repetitions") or 1),
        throughput_se=None if estimate is None else estimate.se,
        throughput_df=None if estimate is None else float(estimate.df),
        throughput_basis=noise.throughput_basis, slo_targets=noise.targets,
    )


def stop_reason(sweep: SweepSpec, vary: str, level: LevelResult) -> str | None:
    rule = sweep.stop_when
    if level.verdict == "SATURATED":
        return (f"over-saturated at {level.load:g}: the level stopped itself (load.stop_when_saturated), "
                "completions falling behind the schedule")
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


def _estimate(lv: LevelResult) -> Estimate | None:
    if lv.throughput_rps is None or lv.throughput_se is None or lv.throughput_df is None:
        return None
    return Estimate(lv.throughput_rps, lv.throughput_se, int(lv.throughput_df))


def _noise_hint(lv: LevelResult) -> str:
    return ("more repetitions (load.repetitions) would tell" if lv.repetitions >= 2 else
            "a longer window or load.repetitions: 3 would tell")


def _gain_call(a: LevelResult, b: LevelResult, gain: float) -> tuple[str, str]:
    """(flat | grew | unclear, the step in words) for concurrency a -> b: b's throughput against
    (1 + gain) times a's, Welch on the two levels' estimates, 95 %."""
    assert a.throughput_rps and b.throughput_rps is not None
    change = b.throughput_rps / a.throughput_rps - 1
    moved = "lowered" if change < 0 else "raised"
    said = (f"going from concurrency {a.load:g} to {b.load:g} {moved} throughput from {a.throughput_rps:.3f} to "
            f"{b.throughput_rps:.3f} req/s ({change:+.1%}")
    ea, eb = _estimate(a), _estimate(b)
    if ea is None or eb is None:
        return "unclear", said + f"; no error for {(a if ea is None else b).load:g}: " \
            f"{(a if ea is None else b).throughput_basis})"
    scaled = Estimate((1 + gain) * ea.value, (1 + gain) * ea.se, ea.df)
    d = difference(scaled, eb)  # b - (1 + gain) a
    low, high = d.interval(0.95)
    gain_low, gain_high = low / ea.value + gain, high / ea.value + gain
    said += f", 95% interval {gain_low:+.1%} to {gain_high:+.1%}; saturation is a gain under {gain:.0%})"
    return ("flat" if high < 0 else "grew" if low > 0 else "unclear"), said


def saturation(sweep: SweepSpec, vary: str, levels: list[LevelResult]) -> tuple[float | None, str]:
    """(the saturation level or None, why), from the complete levels only: an interrupted level
    measured part of its window, and a sweep with one complete level shows no trend. Called only
    outside the noise (see the module docstring); an unclear step is named with its interval."""
    done = [lv for lv in levels if lv.complete]
    cut = [lv.load for lv in levels if not lv.complete and lv.verdict != "SATURATED"]
    unjudged = f" (level {', '.join(f'{x:g}' for x in cut)} did not complete and is left out)" if cut else ""
    if vary == "rate":
        unclear: list[str] = []
        for lv in levels:
            if lv.verdict == "SATURATED":  # the saturation watch stopped it (load.stop_when_saturated)
                return lv.load, (f"at {lv.load:g} req/s offered, the level stopped itself saturated: completions "
                                 "fell behind the schedule beyond the noise while requests in flight kept rising "
                                 "(its passport's run_complete rule has the evidence)")
            if not lv.complete or lv.achieved_fraction is None:
                continue
            limits = lv.throughput_interval
            rel = None if limits is None or not lv.throughput_rps else (limits[1] / lv.throughput_rps)
            high = None if rel is None else lv.achieved_fraction * rel
            said = (f"at {lv.load:g} req/s offered, completions came at {lv.achieved_fraction:.0%} of the offered rate"
                    + ("" if high is None else f", 95% interval up to {high:.0%}"))
            if high is not None and high < sweep.saturation_fraction:
                return lv.load, said + f", under {sweep.saturation_fraction:.0%}"
            if lv.achieved_fraction < sweep.saturation_fraction:
                unclear.append(said)
        if not done:
            return None, "not judged: no level completed"
        if unclear:
            return None, (f"not called: {unclear[0]}: under {sweep.saturation_fraction:.0%}, but not clearly "
                          f"({_noise_hint(done[-1])}){unjudged}")
        return None, f"every complete level kept up with its offered rate{unjudged}"
    if len(done) < 2:
        return None, f"not judged: {len(done)} complete level{'s' if len(done) != 1 else ''}, a trend needs two" \
            + unjudged
    unclear_steps: list[str] = []
    for a, b in zip(done, done[1:]):
        if not a.throughput_rps or b.throughput_rps is None:
            continue
        call, said = _gain_call(a, b, sweep.saturation_gain)
        if call == "flat":
            before = f"; before it, {unclear_steps[0]}, so it may lie lower" if unclear_steps else ""
            return a.load, said + before
        if call == "unclear":
            unclear_steps.append(said)
    if unclear_steps:
        return None, f"not called: {unclear_steps[-1]}: the step cannot be told from the threshold " \
                     f"({_noise_hint(done[-1])}){unjudged}"
    return None, f"throughput still grew at the last complete level ({done[-1].load:g}){unjudged}"


def _slo_said(lv: LevelResult) -> str:
    return "; ".join(f"{t.name}: {t.why}" for t in lv.slo_targets if t.call == lv.slo_call) or "no target"


def knee(levels: list[LevelResult], has_slo: bool) -> tuple[float | None, str]:
    """(the knee or None, why): see the module docstring."""
    if not has_slo:
        return None, "no SLO declared (add `slo:` to the spec to find the knee)"
    knee = None
    stopped: tuple[str, LevelResult] | None = None
    for lv in levels:
        if lv.verdict == "SATURATED":  # stopped because it could not be served: it missed any SLO
            stopped = ("saturated", lv)
            break
        if not lv.complete:
            stopped = ("incomplete", lv)
            break
        call = lv.slo_call
        if call != "met":
            stopped = (call or "unclear", lv)
            break
        knee = lv.load
    if knee is None:
        if stopped is None:
            return None, "no level ran"
        why, lv = stopped
        if why == "incomplete":
            return None, f"not judged: level {lv.load:g} did not complete, so whether it met the SLO is unknown"
        if why == "saturated":
            return None, f"no level met the SLO: the lowest ({lv.load:g}) stopped saturated"
        if why == "missed":
            return None, f"no level met the SLO, not even the lowest ({lv.load:g}: {_slo_said(lv)})"
        return None, f"not called: the lowest level ({lv.load:g}) cannot be told from the SLO ({_slo_said(lv)})"
    later = [lv.load for lv in levels if lv.complete and lv.slo_call == "met" and lv.load > knee]
    note = "the highest load at which it and every lower level clearly met the SLO"
    if stopped is not None and stopped[0] == "saturated":
        note += f"; level {stopped[1].load:g} stopped saturated (the server could not serve it)"
    elif stopped is not None and stopped[0] == "incomplete":
        note += f"; level {stopped[1].load:g} did not complete, so the knee may lie higher"
    elif stopped is not None and stopped[0] == "unclear":
        note += (f"; level {stopped[1].load:g} cannot be told from the SLO ({_slo_said(stopped[1])}), so the knee "
                 f"may lie higher ({_noise_hint(stopped[1])})")
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
