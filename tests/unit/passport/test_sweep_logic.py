"""The sweep's knee and saturation rules on hand-made level summaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from passport import judge
from passport.judge import LevelResult, SweepOutcome, TargetCall
from passport.model import SweepSpec
from passport.report import summary_lines

_SHARES = {True: (0.99, 0.97, 1.0, "met"), False: (0.5, 0.4, 0.6, "missed"), None: (0.9, 0.85, 0.95, "unclear")}


def _level(load: float, thr: float, slo: bool | None | str, achieved: float | None = None,
           complete: bool = True, se: float | None = None) -> LevelResult:
    """A level; `slo`: True (clearly met), False (clearly missed), "unclear", or None (no SLO);
    throughput's error 1 % of it (ten slices) unless `se` says otherwise."""
    targets: tuple[TargetCall, ...] = ()
    if slo is not None:
        share, low, high, call = _SHARES[None if slo == "unclear" else bool(slo)]
        targets = (TargetCall("ttft.any.p90", 0.06, share, low, high, 0.9, call, f"{share:.0%} within"),)
    return LevelResult(load=load, run=f"r{load:g}", verdict="VALID" if complete else "INCOMPLETE", complete=complete,
                       throughput_rps=thr,
                       output_tokens_per_s=None, ttft_p50_s=None, ttft_p99_s=None, itl_p50_s=None, e2e_p99_s=None,
                       error_rate=0.0, achieved_fraction=achieved, slo_met=None if slo is None else slo is True,
                       goodput_rps=None, throughput_se=thr * 0.01 if se is None else se, throughput_df=9.0,
                       slo_targets=targets)


def test_knee_is_the_top_of_the_unbroken_run_of_levels_meeting_the_slo() -> None:
    levels = [_level(1, 1.0, True), _level(2, 1.9, True), _level(4, 2.5, False), _level(8, 2.6, True)]
    knee, note = judge.knee(levels, has_slo=True)
    assert knee == 2 and "higher levels 8 met it again" in note
    assert judge.knee(levels, has_slo=False) == (None, "no SLO declared (add `slo:` to the spec to find the knee)")
    assert judge.knee([_level(1, 1.0, False)], has_slo=True)[0] is None


def test_concurrency_saturation_is_the_last_level_before_throughput_stops_growing() -> None:
    levels = [_level(c, thr, None, se=thr * 0.002) for c, thr in ((1, 1.0), (2, 1.95), (4, 2.1), (8, 2.2))]
    assert judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", levels)[0] == 2
    assert judge.saturation(SweepSpec(saturation_gain=0.06), "concurrency", levels)[0] == 4
    # with each throughput known to +-2 %, the step 2 -> 4 (+7.7 %) is not clearly under 10 %; 4 -> 8 is
    # (by hand: d = 2.1 - 1.1 * 1.95 = -0.045, se 0.0300, Welch df 18.0, t 2.101: gain 4.5 % to 10.9 %)
    wider = [_level(c, thr, None) for c, thr in ((1, 1.0), (2, 1.95), (4, 2.1), (8, 2.2))]
    at, why = judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", wider)
    assert at == 4 and why.endswith("before it, going from concurrency 2 to 4 raised throughput from 1.950 to 2.100 "
                                    "req/s (+7.7%, 95% interval +4.5% to +10.9%; saturation is a gain under 10%), so "
                                    "it may lie lower")


def test_rate_saturation_is_the_first_level_that_cannot_keep_up() -> None:
    levels = [_level(10, 10, None, 1.0), _level(20, 19.5, None, 0.97), _level(40, 30, None, 0.75)]
    assert judge.saturation(SweepSpec(), "rate", levels)[0] == 40
    assert judge.saturation(SweepSpec(saturation_fraction=0.7), "rate", levels) == (
        None, "every complete level kept up with its offered rate")


def test_saturation_says_whether_throughput_rose_a_little_or_fell() -> None:
    fell = [_level(4, 1.434, None), _level(8, 1.389, None)]
    assert judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", fell)[1].startswith(
        "going from concurrency 4 to 8 lowered throughput from 1.434 to 1.389 req/s (-3.1%, 95% interval ")
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


def test_a_knee_or_saturation_inside_the_noise_is_not_called_and_says_why() -> None:
    # the same levels as above, but each throughput known only to +-20 % (se 10 %): the step from
    # 2 to 4 (+7.7 %) cannot be told from the 10 % threshold, nor from doubling
    noisy = [_level(1, 1.0, None, se=0.1), _level(2, 1.95, None, se=0.195), _level(4, 2.1, None, se=0.21)]
    at, why = judge.saturation(SweepSpec(saturation_gain=0.1), "concurrency", noisy)
    assert at is None and why.startswith("not called: going from concurrency 2 to 4 raised throughput")
    assert "cannot be told from the threshold (a longer window or load.repetitions: 3 would tell)" in why
    # an A/A sweep: every level the same engine at the same throughput, each within 1 %: flat, and
    # called flat at the first step, never "grew"
    same = [_level(c, 10.0, None) for c in (1, 2, 4)]
    assert judge.saturation(SweepSpec(), "concurrency", same)[0] == 1
    # a rate level at 85 % of its offered rate, known to +-15 %: under 90 % but not clearly
    rate = [_level(10, 10, None, 1.0), _level(20, 17, None, 0.85, se=17 * 0.07)]
    at, why = judge.saturation(SweepSpec(), "rate", rate)
    assert at is None and why.startswith("not called: at 20 req/s offered, completions came at 85% of the offered "
                                         "rate, 95% interval up to ")
    # the knee: level 4 cannot be told from the SLO, so 2 is a lower bound and says so
    levels = [_level(1, 1.0, True), _level(2, 1.9, True), _level(4, 2.5, "unclear"), _level(8, 2.6, False)]
    knee, note = judge.knee(levels, has_slo=True)
    assert knee == 2 and "level 4 cannot be told from the SLO (ttft.any.p90: 90% within), so the knee may lie " \
                         "higher" in note
    assert judge.knee([_level(1, 1.0, "unclear")], has_slo=True) == (
        None, "not called: the lowest level (1) cannot be told from the SLO (ttft.any.p90: 90% within)")


def test_a_targets_call_needs_its_share_clear_of_the_threshold_by_hand() -> None:
    from passport.judge._level_noise import _share_call

    def call(within: list[int]) -> TargetCall:
        return _share_call("ttft.any.p90", 0.1, 0.9, np.array(within, float), np.ones(len(within)))

    # 40 of 40 within: the binomial error at 90 %, sqrt(0.09 / 40) = 0.0474, gives 1 - 1.96 * 0.0474
    # = 0.907 >= 0.9: met
    assert (round(call([1] * 40).share_low or 0, 3), call([1] * 40).call) == (0.907, "met")
    # 20 of 20: 1 - 1.96 * sqrt(0.09 / 20) = 0.869: too few requests to say
    assert (round(call([1] * 20).share_low or 0, 3), call([1] * 20).call) == (0.869, "unclear")
    # and it says how many would: 1.96^2 x 0.9 / 0.1 = 34.6, so 35; 39 of 40 is unclear on the noise alone
    assert "20 samples, and a p90 target needs at least 35" in call([1] * 20).why
    # 39 of 40 (one miss in the ninth block of four): the blocks' variance of the mean, 0.000625,
    # is under the binomial 0.00225, so 0.975 - 1.96 * 0.0474 = 0.882: unclear
    one_miss = [1] * 32 + [1, 0, 1, 1] + [1] * 4
    assert (round(call(one_miss).share_low or 0, 3), call(one_miss).call) == (0.882, "unclear")
    assert "needs at least" not in call(one_miss).why
    # 4 of 40 within: missed; every failure counts as a sample outside the bound
    assert call([1] * 4 + [0] * 36).call == "missed"
