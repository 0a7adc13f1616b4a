"""guidellm's statistics as passport writes them for guidellm's readers, on hand-computed samples
(guidellm 0.8, schemas/base/statistics.py: percentiles by inverse CDF, population variance)."""

from __future__ import annotations

import numpy as np
import pytest

from passport.audit import inverse_cdf
from passport.audit._peer_files import _distribution, _strategy


def test_guidellms_percentile_is_the_first_value_whose_share_reaches_it() -> None:
    values = np.array([40.0, 10.0, 20.0, 30.0])  # each a quarter: CDF 0.25, 0.5, 0.75, 1.0
    assert [inverse_cdf(values, q) for q in (0.001, 0.25, 0.26, 0.5, 0.51, 0.99)] == [10, 10, 20, 20, 30, 40]
    # numpy's linear percentile would say 25.0 for the median; guidellm says 20.0
    assert float(np.median(values)) == 25.0 and inverse_cdf(values, 0.5) == 20.0


def test_a_distribution_as_guidellm_writes_it() -> None:
    d = _distribution(np.array([1.0, 2.0, 2.0, 5.0, np.nan]))  # the NaN (no such figure) is left out
    assert (d["mean"], d["median"], d["mode"], d["min"], d["max"], d["count"], d["total_sum"]) == (
        2.5, 2.0, 2.0, 1.0, 5.0, 4, 10.0)
    assert d["variance"] == pytest.approx(((1.5**2) + 0.5**2 * 2 + 2.5**2) / 4)  # population: over n
    assert (d["percentiles"]["p25"], d["percentiles"]["p75"], d["percentiles"]["p999"]) == (1.0, 2.0, 5.0)
    empty = _distribution(np.zeros(0))
    assert (empty["count"], empty["mean"], empty["percentiles"]["p50"]) == (0, 0.0, 0.0)


def test_the_load_as_guidellms_strategy() -> None:
    assert _strategy({"pattern": "closed", "concurrency": 1}) == {"type_": "synchronous"}
    assert _strategy({"pattern": "closed", "concurrency": 8}) == {"type_": "concurrent", "streams": 8}
    assert _strategy({"pattern": "constant", "rate_per_s": 4.0, "concurrency": None}) == {"type_": "constant",
                                                                                        "rate": 4.0}
    assert _strategy({"pattern": "poisson", "rate_per_s": 2.5, "concurrency": 4}) == {
        "type_": "poisson", "rate": 2.5, "max_concurrency": 4}
