"""The live progress line: figures over the last requests, recomputed at most every refresh."""

from __future__ import annotations

from passport.cli._live import LiveFigures

MS = 1_000_000


def _row(i: int, ttft_ms: int, tokens: int = 11, tpot_ms: int = 2, outcome: str = "ok",
         phase: str = "measure") -> dict[str, object]:
    sent = i * 1000 * MS  # one request a second
    first = sent + ttft_ms * MS
    last = first + (tokens - 1) * tpot_ms * MS
    return {"outcome": outcome, "phase": phase, "sent_ns": sent, "first_token_ns": first, "last_token_ns": last,
            "end_ns": last, "completion_tokens": tokens}


def test_the_line_shows_running_percentiles_throughput_and_counts() -> None:
    live = LiveFigures(refresh_s=0.0)
    for i, ttft in enumerate([10, 20, 30, 40, 50]):
        live.add(_row(i, ttft))
    live.add(_row(5, 999, outcome="timeout"))  # failures and warm-up never enter the figures
    live.add(_row(6, 999, phase="warmup"))
    line = live.line(in_flight=3, errors=1)
    # TTFT 10..50 ms: p50 30, p99 49.6; TPOT 2 ms; 5 x 11 tokens, ends 1 s apart over 4 s
    assert line == "TTFT p50 30.0 p99 49.6 ms · TPOT p50 2.00 ms · 14 output tok/s · in flight 3, errors 1"


def test_the_window_forgets_old_requests_and_the_line_is_cached_between_refreshes() -> None:
    live = LiveFigures(window=2, refresh_s=1.0)
    for i, ttft in enumerate([100, 10, 20]):
        live.add(_row(i, ttft))
    first = live.line(0, 0, now_ns=5_000 * MS)
    assert first.startswith("TTFT p50 15.0 p99 19.9 ms")  # only the last two requests
    live.add(_row(3, 500))
    assert live.line(1, 0, now_ns=5_500 * MS) == first.replace("in flight 0", "in flight 1")  # within the refresh
    assert "TTFT p50 260.0" in live.line(1, 0, now_ns=6_100 * MS)


def test_before_any_success_the_line_is_the_counts() -> None:
    assert LiveFigures().line(in_flight=2, errors=0) == "in flight 2, errors 0"
