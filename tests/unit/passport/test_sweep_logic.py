"""The sweep's knee and saturation rules on hand-made level summaries."""

from __future__ import annotations

from pathlib import Path

from passport import judge
from passport.judge import LevelResult, SweepOutcome
from passport.model import SweepSpec
from passport.report import summary_lines


def _level(load: float, thr: float, slo: bool | None, achieved: float | None = None,
           complete: bool = True) -> LevelResult:
    return LevelResult(load=load, run=f"r{load:g}", verdict="VALID" if complete else "INCOMPLETE", complete=complete,
                       throughput_rps=thr,
                       output_tokens_per_s=None, ttft_p50_s=None, ttft_p99_s=None, itl_p50_s=None, e2e_p99_s=None,
                       error_rate=0.0, achieved_fraction=achieved, slo_met=slo, goodput_rps=None)


def test_knee_is_the_top_of_the_unbroken_run_of_levels_meeting_the_slo() -> None:
    levels = [_level(1, 1.0, True), _level(2, 1.9, True), _level(4, 2.5, False), _level(8, 2.6, True)]
    knee, note = judge.knee(levels, has_slo=True)
    assert knee == 2 and "higher levels 8 met it again" in note
    assert judge.knee(levels, has_slo=False) == (None, "no SLO declared (add `slo:` to the spec to find the knee)")
    assert judge.knee([_level(1, 1.0, False)], has_slo=True)[0] is None


def test_concurrency_saturation_is_the_last_level_before_throughput_stops_growing() -> None:
    levels = [_level(1, 1.0, None), _level(2, 1.95, None), _level(4, 2.1, None), _level(8, 2.2, None)]
    assert judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", levels)[0] == 2
    assert judge.saturation(SweepSpec(saturation_gain=0.05), "concurrency", levels)[0] == 4


def test_rate_saturation_is_the_first_level_that_cannot_keep_up() -> None:
    levels = [_level(10, 10, None, 1.0), _level(20, 19.5, None, 0.97), _level(40, 30, None, 0.75)]
    assert judge.saturation(SweepSpec(), "rate", levels)[0] == 40
    assert judge.saturation(SweepSpec(saturation_fraction=0.7), "rate", levels) == (
        None, "every complete level kept up with its offered rate")


def test_saturation_says_whether_throughput_rose_a_little_or_fell() -> None:
    fell = [_level(4, 1.434, None), _level(8, 1.389, None)]
    assert judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", fell)[1] == (
        "going from concurrency 4 to 8 lowered throughput from 1.434 to 1.389 req/s (-3.1%; saturation is a gain "
        "under 10%)")
    rose = [_level(4, 2.0, None), _level(8, 2.1, None)]
    assert "raised throughput from 2.000 to 2.100 req/s (+5.0%" in judge.saturation(
        SweepSpec(saturation_gain=0.1), "concurrency", rose)[1]


def test_a_sweep_interrupted_after_one_level_judges_neither_saturation_nor_the_cut_levels_slo() -> None:
    # Ctrl-C during the second level: one complete level shows no trend, and the cut level's
    # partial window says nothing about its SLO (it read "saturation: not reached (throughput
    # still grew at the last level)" and "SLO missed")
    levels = [_level(1, 1.0, True), _level(2, 0.4, None, complete=False)]
    assert judge.saturation(SweepSpec(), "concurrency", levels) == (
        None, "not judged: 1 complete level, a trend needs two (level 2 did not complete and is left out)")
    knee, note = judge.knee(levels, has_slo=True)
    assert knee == 1 and note.endswith("level 2 did not complete, so the knee may lie higher")
    assert judge.knee([_level(1, 0.4, None, complete=False)], has_slo=True) == (
        None, "not judged: level 1 did not complete, so whether it met the SLO is unknown")
    # the slower cut level is not read as throughput falling
    three = [_level(1, 1.0, None), _level(2, 1.9, None), _level(4, 0.5, None, complete=False)]
    assert judge.saturation(SweepSpec(), "concurrency", three)[1].startswith(
        "throughput still grew at the last complete level (2)")
    outcome = SweepOutcome(folder=Path("sweep"), vary="concurrency", has_slo=True, levels=levels)
    outcome.saturation, outcome.saturation_note = judge.saturation(SweepSpec(), "concurrency", levels)
    assert summary_lines(outcome)[1].startswith("saturation: unknown (not judged: 1 complete level")
