"""Sends on absolute deadlines, kept by a dedicated thread rather than by the event loop.

Why a thread: the event loop cannot keep a deadline finer than its timers (epoll and libuv take
millisecond timeouts) and a send due now waits behind whatever callback is running (a record, a
parse of a long answer). The pacer thread sleeps on the monotonic clock with its timer slack set
to 1 ns (Linux `prctl`), wakes `lead_ns` early, takes the GIL (the interpreter's switch interval
is 100 us while a pacer runs, so a busy loop hands it over within that), spins the last few
microseconds and writes the request's bytes to the connection's socket itself, stamping
`sent_ns` just before the write. The loop armed the exchange beforehand (connection chosen,
response parser waiting), so it reads the answer as usual; a write the socket could not take
whole is finished by the loop's transport, in order.

Limits: a TLS connection can only be written by its transport; there the thread wakes the loop at
the deadline (`call_soon_threadsafe`) and the loop sends, precise when the loop is idle and late
behind a busy one; `PacerStats` counts both kinds. Each armed send owns a duplicate of the
socket's descriptor, so a connection closed between arming and sending is written to harmlessly
(its exchange has already failed) instead of to a reused descriptor number. The thread's CPU time
(sleeping costs none; the lead's spin does) is in `PacerStats.cpu_s` for its owner, and in the
process CPU share every run records (telemetry.parquet `cpu_share`, results.client); the passport
does not yet give it a line of its own.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Pacer", "PacedSend", "PacerStats", "SWITCH_INTERVAL_S"]

_now = time.perf_counter_ns
SWITCH_INTERVAL_S = 1e-4  # the GIL's switch interval while a pacer runs (CPython's default is 5 ms)
_LEAD_NS = 150_000  # wake this early: a wake-up, then the GIL from a busy loop, then a short spin
_COARSE_NS = 2_000_000  # further out than this, wait on the condition (new earlier sends wake it)
_ARMED, _SENDING, _DONE, _WITHDRAWN = range(4)


def _fine_timer_slack() -> bool:
    """Set this thread's timer slack to 1 ns (Linux; the default 50 us is added to every sleep)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(29, 1, 0, 0, 0)) == 0  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        return False


@dataclass
class PacerStats:
    """What one pacer did: sends written by its thread (`raw`) or handed to the loop at their
    deadline (`via_loop`), sends withdrawn before their deadline, sends armed after their
    deadline had passed (`armed_late`: the loop was behind), and the thread's CPU seconds."""

    raw: int = 0
    via_loop: int = 0
    withdrawn: int = 0
    armed_late: int = 0
    cpu_s: float = 0.0
    timer_slack_1ns: bool = False


class PacedSend:
    """One armed send: its deadline, the request, where it goes (a duplicated descriptor, or -1
    for the loop's transport) and what to call on the loop after the write."""

    __slots__ = ("deadline_ns", "request", "fd", "stamp", "rest", "state", "lock")

    def __init__(self, deadline_ns: int, request: bytes, fd: int, stamp: Callable[[int], None],
                 rest: Callable[[bytes], None]) -> None:
        self.deadline_ns = deadline_ns
        self.request = request
        self.fd = fd
        self.stamp = stamp  # called with sent_ns right before the bytes go (either thread)
        self.rest = rest  # the loop's write, for what the thread's write left (or all of it)
        self.state = _ARMED
        self.lock = threading.Lock()


class Pacer:
    """The dedicated sending thread of one event loop. `start()` on the loop; `submit()` arms a
    send; `withdraw()` takes back one not yet sent; `stop()` withdraws the rest and returns the
    stats. Deadlines are perf_counter_ns."""

    def __init__(self, lead_ns: int = _LEAD_NS) -> None:
        self._lead_ns = lead_ns
        self._heap: list[tuple[int, int, PacedSend]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._switch_before: float | None = None
        self.stats = PacerStats()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start the thread (from the loop it serves) and lower the GIL's switch interval."""
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_before, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._run, name="passport-pacer", daemon=True)
        self._thread.start()

    def submit(self, send: PacedSend) -> None:
        """Arm `send`; the thread writes it at its deadline (at once if that has passed)."""
        if send.deadline_ns <= _now():
            self.stats.armed_late += 1
        with self._cond:
            heapq.heappush(self._heap, (send.deadline_ns, next(self._order), send))
            self._cond.notify()

    def withdraw(self, send: PacedSend) -> bool:
        """Take back `send` if it has not gone (True); waits for a write under way to finish."""
        with send.lock:
            if send.state != _ARMED:
                return False
            send.state = _WITHDRAWN
        self._close(send)
        self.stats.withdrawn += 1
        return True

    def stop(self) -> PacerStats:
        """Withdraw what is still armed, end the thread, restore the switch interval."""
        with self._cond:
            self._stopping = True
            pending = [s for _, _, s in self._heap]
            self._heap.clear()
            self._cond.notify()
        for send in pending:
            self.withdraw(send)
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._switch_before is not None:
            sys.setswitchinterval(self._switch_before)
            self._switch_before = None
        return self.stats

    # -- the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        self.stats.timer_slack_1ns = _fine_timer_slack()
        cpu0 = time.thread_time()
        try:
            while True:
                with self._cond:
                    if self._stopping:
                        return
                    if not self._heap:
                        self._cond.wait()
                        continue
                    due = self._heap[0][0] - _now()
                    if due > _COARSE_NS:
                        self._cond.wait((due - _COARSE_NS // 2) / 1e9)
                        continue
                    send = heapq.heappop(self._heap)[2]
                wait_ns = send.deadline_ns - self._lead_ns - _now()
                if wait_ns > 0:
                    time.sleep(wait_ns / 1e9)  # the GIL is free while it sleeps
                while _now() < send.deadline_ns:
                    pass  # the lead's last microseconds, holding the GIL
                self._fire(send)
        finally:
            self.stats.cpu_s = time.thread_time() - cpu0

    def _fire(self, send: PacedSend) -> None:
        assert self._loop is not None
        with send.lock:
            if send.state != _ARMED:
                return
            send.state = _SENDING
            if send.fd < 0:
                self.stats.via_loop += 1
                self._loop.call_soon_threadsafe(self._send_on_loop, send)
                return
            send.stamp(_now())
            written = 0
            try:
                written = os.write(send.fd, send.request)
            except OSError:
                pass  # the transport's own write meets the same error and fails the exchange
            send.state = _DONE
        self._close(send)
        self.stats.raw += 1
        if written < len(send.request):
            self._loop.call_soon_threadsafe(send.rest, send.request[written:])

    @staticmethod
    def _send_on_loop(send: PacedSend) -> None:
        send.stamp(_now())
        send.rest(send.request)
        send.state = _DONE

    @staticmethod
    def _close(send: PacedSend) -> None:
        if send.fd >= 0:
            os.close(send.fd)
            send.fd = -1
