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


def test_tokens_per_s_ends_on_the_passports_definition() -> None:
    # closed@2 on a slow engine: 4 requests of 32 tokens, 2 at a time, each taking 4 s; the old
    # line divided 128 tokens by the 4 s between the first and last completion (32 tok/s) while
    # the passport divides by the window from the first send to the last end, 8 s (16 tok/s)
    live = LiveFigures(refresh_s=0.0, rate_window_s=60.0)
    for sent_s, end_s in ((0, 4), (0, 4), (4, 8), (4, 8)):
        live.add({"outcome": "ok", "phase": "measure", "sent_ns": sent_s * 1000 * MS,
                  "first_token_ns": (sent_s * 1000 + 100) * MS, "last_token_ns": end_s * 1000 * MS,
                  "end_ns": end_s * 1000 * MS, "completion_tokens": 32})
    assert "· 16 output tok/s ·" in live.line(2, 0)


def test_the_line_names_worker_processes() -> None:
    assert LiveFigures(workers=4).line(3, 0) == "in flight 3, errors 0 · 4 worker processes (their figures: in " \
                                                "the passport)"


def test_piped_the_progress_is_plain_lines_never_cut_to_a_terminals_width() -> None:
    import io

    from rich.console import Console

    from passport.cli._shared import RichProgress

    out = io.StringIO()
    bar = RichProgress(400, console=Console(file=out, width=40), plain_every_s=0.0)
    for i, ttft in enumerate([10, 20, 30]):
        bar.update(i + 1, 2, 0, _row(i, ttft))
    bar.stop()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\x1b" not in out.getvalue()  # no escape codes, one line per report
    assert lines[-1].startswith("requests 3/400 · TTFT p50 20.0 p99 29.8 ms · TPOT p50 2.00 ms · ")
    assert "in flight 2, errors 0 · 0:00" in lines[-1]


def test_on_a_terminal_the_bar_is_told_at_most_ten_times_a_second_and_ends_on_the_last_counts() -> None:
    import io

    from rich.console import Console

    from passport.cli._shared import RichProgress

    out = io.StringIO()
    bar = RichProgress(500, console=Console(file=out, width=120, force_terminal=True))
    told: list[int] = []
    draw = bar._draw
    bar._draw = lambda: (told.append(bar._last[0]), draw())[1]  # type: ignore[method-assign]
    for i in range(500):  # far faster than ten a second
        bar.update(i + 1, 1, 0, _row(i, 10))
    bar.stop()
    assert told[0] == 1 and told[-1] == 500 and len(told) < 50  # the first, a few, and the last at stop
    assert "500/500" in out.getvalue()
