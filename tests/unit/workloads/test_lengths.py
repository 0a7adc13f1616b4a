from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from workloads import LengthDist


def _draw(**kwargs: object) -> np.ndarray:
    return LengthDist(**kwargs).sample(np.random.default_rng(0), 20000)  # type: ignore[arg-type]


def test_lognormal_mean_is_the_mean_of_lengths_not_of_logs() -> None:
    draws = _draw(dist="lognormal", mean=512, sigma=0.5)
    assert abs(draws.mean() - 512) / 512 < 0.02


def test_clamps_apply_to_every_distribution() -> None:
    for kwargs in ({"dist": "normal", "mean": 100, "std": 80}, {"dist": "lognormal", "mean": 100, "sigma": 1.5},
                   {"dist": "uniform", "low": 1, "high": 500}):
        draws = _draw(**kwargs, min=20, max=300)
        assert draws.min() >= 20 and draws.max() <= 300


def test_uniform_is_inclusive_and_fixed_is_constant() -> None:
    draws = _draw(dist="uniform", low=3, high=5)
    assert set(draws.tolist()) == {3, 4, 5}
    assert set(_draw(dist="fixed", value=7).tolist()) == {7}


def test_missing_parameters_are_named() -> None:
    with pytest.raises(ValidationError, match="lognormal needs mean, sigma; missing sigma"):
        LengthDist(dist="lognormal", mean=5)
    with pytest.raises(ValidationError, match="min must be <= max"):
        LengthDist(dist="fixed", value=5, min=10, max=2)
