"""Running figures for the progress line during the timed phase: TTFT p50/p99, TPOT p50 and
output tokens/s over the last requests, beside in flight and errors.

Fed one finished request row at a time on the event loop, so each `add` is a few array stores;
percentiles are computed only when the line is read, at most every `refresh_s`. TTFT and TPOT
are over the last `window` successful measured requests. Output tokens/s is the passport's own
definition over the last `rate_window_s`: tokens of the successful measured requests that ended
in it, over the window (or, earlier, the time since the first measured send), so the line ends on
the figure the passport prints. Runs sent by several worker processes see only counts here (the
rows stay in the workers), and the line says so. A live line is a gauge for the operator: the
passport's figures come from the raw logs afterwards, never from it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping

import numpy as np

__all__ = ["LiveFigures"]

_SUCCESS = ("ok", "truncated")


class LiveFigures:
    def __init__(self, window: int = 2048, rate_window_s: float = 10.0, refresh_s: float = 0.5,
                 workers: int = 1) -> None:
        self._ttft = np.full(window, np.nan)
        self._tpot = np.full(window, np.nan)
        self._e2e = np.full(window, np.nan)  # shown for answers without tokens (embeddings, rerank, score)
        self._next = 0
        self._tokens: deque[tuple[int, int]] = deque()  # (end_ns, completion tokens)
        self._rate_window_ns = int(rate_window_s * 1e9)
        self._refresh_ns = int(refresh_s * 1e9)
        self._shown_at = -self._refresh_ns
        self._line = ""
        self._first_sent_ns: int | None = None
        self._workers = workers

    def add(self, row: Mapping[str, object]) -> None:
        """Take one finished request's row (as the runner records it)."""
        if row.get("phase") != "measure":
            return
        sent, first, last, end = (row.get(k) for k in ("sent_ns", "first_token_ns", "last_token_ns", "end_ns"))
        if isinstance(sent, int) and (self._first_sent_ns is None or sent < self._first_sent_ns):
            self._first_sent_ns = sent
        if row.get("outcome") not in _SUCCESS:
            return
        tokens = row.get("completion_tokens")
        i = self._next % len(self._ttft)
        self._ttft[i] = (first - sent) / 1e9 if isinstance(first, int) and isinstance(sent, int) else np.nan
        self._tpot[i] = ((last - first) / (tokens - 1) / 1e9
                         if isinstance(last, int) and isinstance(first, int) and isinstance(tokens, int) and tokens > 1
                         else np.nan)
        self._e2e[i] = (end - sent) / 1e9 if isinstance(end, int) and isinstance(sent, int) else np.nan
        self._next += 1
        if isinstance(end, int) and isinstance(tokens, int) and tokens:
            self._tokens.append((end, tokens))

    def line(self, in_flight: int, errors: int, now_ns: int | None = None, fresh: bool = False) -> str:
        """The progress detail: recomputed at most every refresh_s (or now, when `fresh`), else
        the last one."""
        now = time.perf_counter_ns() if now_ns is None else now_ns
        tail = f"in flight {in_flight}, errors {errors}"
        if self._workers > 1:
            tail += f" · {self._workers} worker processes (their figures: in the passport)"
        if now - self._shown_at < self._refresh_ns and self._line and not fresh:
            return f"{self._line} · {tail}"
        self._shown_at = now
        ttft = self._ttft[np.isfinite(self._ttft)]
        tpot = self._tpot[np.isfinite(self._tpot)]
        parts = []
        if len(ttft):
            p50, p99 = np.percentile(ttft, [50, 99]) * 1000.0
            parts.append(f"TTFT p50 {p50:.1f} p99 {p99:.1f} ms")
        if len(tpot):
            parts.append(f"TPOT p50 {np.percentile(tpot, 50) * 1000.0:.2f} ms")
        e2e = self._e2e[np.isfinite(self._e2e)]
        if not len(ttft) and len(e2e):
            p50, p99 = np.percentile(e2e, [50, 99]) * 1000.0
            parts.append(f"latency p50 {p50:.1f} p99 {p99:.1f} ms")
        if self._tokens and self._first_sent_ns is not None:
            latest = self._tokens[-1][0]
            while self._tokens and self._tokens[0][0] <= latest - self._rate_window_ns:
                self._tokens.popleft()
            span_s = min(self._rate_window_ns, latest - self._first_sent_ns) / 1e9
            if span_s > 0:
                parts.append(f"{sum(t for _, t in self._tokens) / span_s:,.0f} output tok/s")
        self._line = " · ".join(parts)
        return f"{self._line} · {tail}" if self._line else tail
