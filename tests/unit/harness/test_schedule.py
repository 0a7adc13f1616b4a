from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness import LoadSpec, WorkerShare, build_schedule

OPEN = ["constant", "poisson", "gamma"]


def _offsets_s(spec: LoadSpec) -> np.ndarray:
    return np.asarray(build_schedule(spec).table.column("intended_offset_ns").to_numpy(), dtype=float) / 1e9


def test_poisson_arrivals_have_declared_mean_rate_and_cv_one() -> None:
    spec = LoadSpec(pattern="poisson", rate_per_s=50.0, measure={"requests": 20000}, seed=7)
    gaps = np.diff(_offsets_s(spec))
    # mean gap 1/rate: a z-test at 4 sigma (the exponential's sd equals its mean)
    assert abs(gaps.mean() - 0.02) < 4 * 0.02 / np.sqrt(len(gaps))
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05
    # and the gaps are exponential: Kolmogorov-Smirnov does not reject at 1 %
    assert stats.kstest(gaps, "expon", args=(0, 0.02)).pvalue > 0.01


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_cv_is_one_over_sqrt_burstiness(burstiness: float) -> None:
    spec = LoadSpec(pattern="gamma", rate_per_s=10.0, burstiness=burstiness, measure={"requests": 20000}, seed=3)
    gaps = np.diff(_offsets_s(spec))
    assert abs(gaps.mean() - 0.1) / 0.1 < 0.05
    assert abs(gaps.std() / gaps.mean() - 1 / np.sqrt(burstiness)) < 0.06


def test_constant_gaps_are_exact() -> None:
    gaps = np.diff(_offsets_s(LoadSpec(pattern="constant", rate_per_s=4.0, measure={"requests": 9})))
    assert np.allclose(gaps, 0.25, atol=1e-9)


@pytest.mark.parametrize("pattern", OPEN)
def test_same_seed_same_hash_other_seed_other_hash(pattern: str) -> None:
    a = build_schedule(LoadSpec(pattern=pattern, rate_per_s=5, measure={"requests": 50}, seed=1, burstiness=0.5))
    b = build_schedule(LoadSpec(pattern=pattern, rate_per_s=5, measure={"requests": 50}, seed=1, burstiness=0.5))
    c = build_schedule(LoadSpec(pattern=pattern, rate_per_s=5, measure={"requests": 50}, seed=2, burstiness=0.5))
    assert a.sha256 == b.sha256 and a.table.equals(b.table)
    assert pattern == "constant" or a.sha256 != c.sha256


@pytest.mark.parametrize("pattern", OPEN)
def test_duration_window_holds_arrivals_within_it_after_warmup(pattern: str) -> None:
    spec = LoadSpec(pattern=pattern, rate_per_s=20, warmup={"requests": 5}, measure={"duration_s": 2.0}, seed=5)
    sched = build_schedule(spec)
    phases = sched.table.column("phase").to_pylist()
    offsets = _offsets_s(spec)
    assert phases[:5] == ["warmup"] * 5 and set(phases[5:]) == {"measure"}
    assert offsets[-1] < offsets[5] + 2.0 and sched.window_ns == 2_000_000_000
    assert 20 <= len(offsets) - 5 <= 60  # 40 expected


def test_closed_loop_has_no_intended_offsets_and_a_pool() -> None:
    sched = build_schedule(LoadSpec(pattern="closed", concurrency=4, warmup={"requests": 2}, measure={"requests": 10}))
    assert sched.table.num_rows == 12 and sched.table.column("intended_offset_ns").null_count == 12
    duration = build_schedule(LoadSpec(pattern="closed", concurrency=4, measure={"duration_s": 5}), pool_size=32)
    assert duration.pool_size == 32


def test_open_loop_needs_a_rate_and_closed_loop_needs_users() -> None:
    with pytest.raises(ValueError, match="needs load.rate_per_s"):
        LoadSpec(pattern="poisson")
    with pytest.raises(ValueError, match="needs load.concurrency"):
        LoadSpec(pattern="closed")
    with pytest.raises(ValueError, match="load.stop_when_saturated is for open loops"):
        LoadSpec(pattern="closed", concurrency=4, stop_when_saturated=True)
    assert LoadSpec(pattern="poisson", rate_per_s=2, stop_when_saturated=True).stop_when_saturated


def test_a_worker_share_of_a_total_gives_the_remainder_to_the_first_workers() -> None:
    shares = [WorkerShare(k, 3).part(8) for k in range(3)]
    assert shares == [3, 3, 2] and sum(shares) == 8
    assert WorkerShare().part(5) == 5


def test_workers_need_a_user_or_a_slot_each_and_a_sane_count() -> None:
    with pytest.raises(ValueError, match="load.workers 4 is more than load.concurrency 2"):
        LoadSpec(pattern="closed", concurrency=2, workers=4)
    with pytest.raises(ValueError, match="from 1 to 64 processes"):
        LoadSpec(pattern="poisson", rate_per_s=10, workers=0)
    assert LoadSpec(pattern="poisson", rate_per_s=10, workers="auto").workers == "auto"
