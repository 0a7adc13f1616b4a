"""The clock echo behind Ray workers' offsets: on one host the true offset is known (zero, or a
shift the echo's clock is given), and causality guarantees it lies within the reported uncertainty."""

from __future__ import annotations

import time

import pytest

from harness import free_port
from passport.run._clock_echo import ClockEcho, measure_offset


@pytest.mark.parametrize("shift_ns", [0, 5_000_000, -123_456_789])
def test_offset_lies_within_half_the_fastest_round_trip(shift_ns: int) -> None:
    echo = ClockEcho("127.0.0.1", clock_ns=lambda: time.perf_counter_ns() + shift_ns)
    try:
        offset_ns, uncertainty_ns = measure_offset(echo.address, probes=50)
        assert uncertainty_ns > 0
        assert abs(offset_ns - shift_ns) <= uncertainty_ns
        again_ns, again_uncertainty_ns = measure_offset(echo.address, probes=50)  # one connection after another
        assert abs(again_ns - shift_ns) <= again_uncertainty_ns
    finally:
        echo.close()


def test_an_unreachable_echo_raises_oserror_for_the_caller_to_fall_back() -> None:
    with pytest.raises(OSError):
        measure_offset(("127.0.0.1", free_port()), probes=3, timeout_s=1.0)
