"""Length distributions for input and output token counts.

A distribution is declared in the spec (`{dist: lognormal, mean: 512, sigma: 0.5, min: 16,
max: 2048}`) and sampled with a seeded numpy Generator, so the same seed gives the same lengths.
Every draw is rounded to an integer and clamped to [min, max]; the clamp is part of the
declaration, so it is echoed in the protocol.

Parameters, by `dist`:
- `fixed`: `value`.
- `uniform`: integers in [`low`, `high`] inclusive.
- `normal`: `mean`, `std`.
- `lognormal`: `mean` is the mean of the length itself (not of its log) and `sigma` the
  standard deviation of its log; so `mean: 512, sigma: 0.5` has mean 512 tokens.
"""

from __future__ import annotations

import math
from typing import Literal, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["LengthDist"]


class LengthDist(BaseModel):
    """A declared distribution of token counts, clamped to [min, max]."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    dist: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        description="Shape of the distribution."
    )
    value: int | None = Field(None, ge=1, le=10_000_000, description="fixed: the length in tokens.")
    low: int | None = Field(None, ge=1, le=10_000_000, description="uniform: smallest length, inclusive.")
    high: int | None = Field(None, ge=1, le=10_000_000, description="uniform: largest length, inclusive.")
    mean: float | None = Field(None, gt=0, le=10_000_000, description="normal/lognormal: mean length in tokens.")
    std: float | None = Field(None, ge=0, description="normal: standard deviation in tokens.")
    sigma: float | None = Field(None, ge=0, description="lognormal: standard deviation of log length.")
    min: int = Field(1, ge=1, le=10_000_000, description="Clamp: no draw is shorter.")
    max: int | None = Field(None, ge=1, le=10_000_000, description="Clamp: no draw is longer (None: no clamp).")

    @model_validator(mode="after")
    def _check_parameters(self) -> Self:
        needed = {
            "fixed": ("value",),
            "uniform": ("low", "high"),
            "normal": ("mean", "std"),
            "lognormal": ("mean", "sigma"),
        }[self.dist]
        missing = [name for name in needed if getattr(self, name) is None]
        if missing:
            raise ValueError(
                f"dist: {self.dist} needs {', '.join(needed)}; missing {', '.join(missing)}"
            )
        if self.dist == "uniform" and self.low is not None and self.high is not None:
            if self.low > self.high:
                raise ValueError(f"uniform needs low <= high (got low={self.low}, high={self.high})")
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min must be <= max (got min={self.min}, max={self.max})")
        return self

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw `n` integer lengths (int64), clamped to [min, max]."""
        if self.dist == "fixed":
            assert self.value is not None
            raw = np.full(n, float(self.value))
        elif self.dist == "uniform":
            assert self.low is not None and self.high is not None
            raw = rng.integers(self.low, self.high, size=n, endpoint=True).astype(np.float64)
        elif self.dist == "normal":
            assert self.mean is not None and self.std is not None
            raw = rng.normal(self.mean, self.std, size=n)
        else:
            assert self.mean is not None and self.sigma is not None
            mu = math.log(self.mean) - self.sigma**2 / 2.0
            raw = rng.lognormal(mu, self.sigma, size=n)
        upper = np.inf if self.max is None else float(self.max)
        clipped: np.ndarray = np.clip(np.rint(raw), float(self.min), upper).astype(np.int64)
        return clipped

    def __str__(self) -> str:
        body = ",".join(
            f"{k}={v}" for k, v in self.model_dump(exclude_none=True).items() if k != "dist"
        )
        return f"{self.dist}({body})"
