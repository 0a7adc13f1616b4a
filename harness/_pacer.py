"""Sends on absolute deadlines, kept by a dedicated thread rather than by the event loop.

Why a thread: the event loop cannot keep a deadline finer than its timers (epoll and libuv take
millisecond timeouts) and a send due now waits behind whatever callback is running (a record, a
parse of a long answer). The pacer thread sleeps to an absolute deadline on the monotonic clock
(`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` through ctypes, which releases the GIL while
it sleeps; its timer slack set to 1 ns with Linux `prctl`), waking `lead_ns` early; it then takes
the GIL (the interpreter's switch interval is 50 us while a pacer runs, so a busy loop hands it
over within that), spins whatever is left of the lead and writes the request's bytes to the
connection's socket itself, stamping `sent_ns` just before the write. The loop armed the exchange
beforehand (connection chosen, response parser waiting), so it reads the answer as usual; a write
the socket could not take whole is finished by the loop's transport, in order.

The lead is short (25 us: the kernel's wake-up on an idle core, measured 5-20 us here): an earlier
design slept relatively (`time.sleep`) and spun a 150 us lead holding the GIL, which cost about
120 us of CPU per send (benchmarks/roofline.py, the bare pacer at 2,000/s); where the wake-up is
late the send is late by as much, and its lag is measured and judged like any other.

Limits: a TLS connection can only be written by its transport; there the thread wakes the loop at
the deadline (`call_soon_threadsafe`) and the loop sends, precise when the loop is idle and late
behind a busy one; `PacerStats` counts both kinds. Each armed send owns a duplicate of the
socket's descriptor, so a connection closed between arming and sending is written to harmlessly
(its exchange has already failed) instead of to a reused descriptor number. Off Linux (no
clock_nanosleep, or perf_counter not on CLOCK_MONOTONIC) the thread sleeps relatively and the
lead is the old 150 us. The thread's CPU time (sleeping costs none; the lead's spin does) is in
`PacerStats.cpu_s`, and in the passport (results.client.pacer).
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
SWITCH_INTERVAL_S = 5e-5  # the GIL's switch interval while a pacer runs (CPython's default is 5 ms)
_LEAD_NS = 25_000  # wake this early (an absolute sleep): the kernel's wake-up, then a short spin
_RELATIVE_LEAD_NS = 150_000  # with a relative sleep (no clock_nanosleep): it overshoots more
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


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _absolute_sleep() -> Callable[[int], None] | None:
    """A function sleeping until a perf_counter_ns time with `clock_nanosleep(CLOCK_MONOTONIC,
    TIMER_ABSTIME)` (the GIL released while it sleeps; a signal may end it early, so callers
    check the clock after); None where there is none or perf_counter is another clock."""
    if not sys.platform.startswith("linux") or \
            time.get_clock_info("perf_counter").implementation != "clock_gettime(CLOCK_MONOTONIC)":
        return None
    try:
        call = ctypes.CDLL(None, use_errno=True).clock_nanosleep
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Timespec), ctypes.c_void_p]
    call.restype = ctypes.c_int
    until = _Timespec()
    at = ctypes.byref(until)

    def sleep_until(deadline_ns: int) -> None:
        until.tv_sec, until.tv_nsec = divmod(deadline_ns, 1_000_000_000)
        call(1, 1, at, None)  # CLOCK_MONOTONIC, TIMER_ABSTIME

    return sleep_until


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

    def __init__(self, lead_ns: int | None = None) -> None:
        self._sleep_until = _absolute_sleep()
        self._lead_ns = lead_ns if lead_ns is not None else _LEAD_NS if self._sleep_until else _RELATIVE_LEAD_NS
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
                wake_ns = send.deadline_ns - self._lead_ns
                if wake_ns > _now():  # the GIL is free while it sleeps
                    if self._sleep_until is not None:
                        self._sleep_until(wake_ns)
                    else:
                        time.sleep((wake_ns - _now()) / 1e9)
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
