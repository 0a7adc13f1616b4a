"""Sends on absolute deadlines, kept by a dedicated thread rather than by the event loop.

Why a thread: the event loop cannot keep a deadline finer than its timers (epoll and libuv take
millisecond timeouts) and a send due now waits behind whatever callback is running (a record, a
parse of a long answer). The loop arms each send beforehand (connection chosen, response parser
waiting, a duplicate of the socket's descriptor), so it reads the answer as usual; the thread
writes the request's bytes to the socket at the deadline, stamping `sent_ns` just before the
write; a write the socket could not take whole is finished by the loop's transport, in order.

**The C thread** (Linux, where `harness._native` can build harness/_pacer.c; the default): the
thread never takes the GIL, so neither the loop nor a writer thread holding it (a Parquet part is
built in C++ holding the GIL for milliseconds; measured, docs/concepts/client-cost.md) delays a
send. It keeps the armed sends in a heap in slots of its own, sleeps on a CLOCK_MONOTONIC
condition to `lead_ns` (25 us) before the earliest, spins the rest and writes; it asks for
SCHED_FIFO (granted to root, or where RLIMIT_RTPRIO allows) so that on a core it shares with the
loop it runs when due rather than when the scheduler's fairness lets it (at 2,000 requests/s on
one core: dispatch lag p99 0.10 ms real-time, 1.7 ms without). The loop learns of each send it
is done with from a ring it drains as it arms the next (a send whole, or one withdrawn: no wake-up
of its own), or from a pipe (`loop.add_reader`) when it must write (TLS, or what the socket did
not take); each is stamped and its slot freed; `went_at` reads a send's time from its slot when
the answer came before the report.

**The Python thread** (elsewhere, or `PASSPORT_NATIVE=0`): it sleeps to the deadline with
`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` through ctypes (the GIL free while it sleeps;
its timer slack 1 ns with `prctl`), wakes `lead_ns` early, takes the GIL (the switch interval is
50 us while it runs), spins what is left and writes through libc called with the GIL held (one
handover per send, not three). An earlier design slept relatively and spun a 150 us lead holding
the GIL, about 120 us of CPU per send; without clock_nanosleep (or perf_counter not on
CLOCK_MONOTONIC) the thread still sleeps relatively with that lead.

Limits: a TLS connection can only be written by its transport; there the loop is told at the
deadline and sends, precise when the loop is idle and late behind a busy one; `PacerStats` counts
both kinds. A connection closed between arming and sending is written to harmlessly through the
send's own descriptor (its exchange has already failed), never to a reused descriptor number.
The thread's CPU time (sleeping costs none; the lead's spin does) is in `PacerStats.cpu_s`, and
in the passport (results.client.pacer, with which thread it was).
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
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness import _native
from harness._native import NativeLibrary

__all__ = ["Pacer", "PacedSend", "PacerStats", "SWITCH_INTERVAL_S"]

_now = time.perf_counter_ns
SWITCH_INTERVAL_S = 5e-5  # the GIL's switch interval while a pacer runs (CPython's default is 5 ms)
_LEAD_NS = 25_000  # wake this early (an absolute sleep): the kernel's wake-up, then a short spin
_RELATIVE_LEAD_NS = 150_000  # with a relative sleep (no clock_nanosleep): it overshoots more
_COARSE_NS = 2_000_000  # further out than this, wait on the condition (new earlier sends wake it)
# a send's state (the Python thread uses _ARMED to _WITHDRAWN; the C thread's slots all, harness/_pacer.c)
_FREE, _ARMED, _SENDING, _SENT, _WITHDRAWN = range(5)
_SLOTS = 1 << 16  # C slots: sends armed and not yet reported back to the loop
_DRAIN = 256  # reports taken from the C thread's ring per call


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


def _holding_gil_io() -> tuple[Callable[[int, bytes, int], int], Callable[[int], int]] | None:
    """libc's `write` and `close` called through `ctypes.PyDLL`, which keeps the GIL across the
    call (None off Linux): on a non-blocking socket both take microseconds, and `os.write` /
    `os.close` release the GIL and must win it back from a busy loop each time (up to a switch
    interval apiece), which delayed the sends due just after."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        write, close = libc.write, libc.close
    except (OSError, AttributeError):
        return None
    write.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    write.restype = ctypes.c_ssize_t
    close.argtypes = [ctypes.c_int]
    close.restype = ctypes.c_int
    return write, close


def _os_write(fd: int, data: bytes, size: int) -> int:
    try:
        return os.write(fd, data)
    except OSError:
        return -1


def _os_close(fd: int) -> int:
    try:
        os.close(fd)
    except OSError:
        return -1
    return 0


_write, _close_fd = _holding_gil_io() or (_os_write, _os_close)


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
    """What one pacer did: sends written at their deadline by its thread (`raw`) or handed to the
    loop then (`via_loop`), sends withdrawn before their deadline, sends armed after their
    deadline had passed (`armed_late`: the loop was behind), the thread's CPU seconds, and
    whether the C thread kept them (`native`; `native_reason` says why not)."""

    raw: int = 0
    via_loop: int = 0
    withdrawn: int = 0
    armed_late: int = 0
    cpu_s: float = 0.0
    timer_slack_1ns: bool = False
    native: bool = False
    native_reason: str | None = None
    realtime: bool = False  # the C thread ran under SCHED_FIFO (where this user may ask for it)


class PacedSend:
    """One armed send: its deadline, the request, where it goes (a duplicated descriptor, or -1
    for the loop's transport) and what to call on the loop after the write."""

    __slots__ = ("deadline_ns", "request", "fd", "stamp", "rest", "state", "lock", "sent_ns", "slot", "gen")

    def __init__(self, deadline_ns: int, request: bytes, fd: int, stamp: Callable[[int], None],
                 rest: Callable[[bytes], None]) -> None:
        self.deadline_ns = deadline_ns
        self.request = request
        self.fd = fd
        self.stamp = stamp  # called with sent_ns once the bytes went (either thread)
        self.rest = rest  # the loop's write, for what the thread's write left (or all of it)
        self.state = _ARMED
        self.lock = threading.Lock()
        self.sent_ns = 0  # when the write began (0: not yet, or never)
        self.slot = -1  # the C thread's slot holding it (-1: the Python thread keeps it)
        self.gen = 0


class _Slot(ctypes.Structure):
    """`pp_slot` of harness/_pacer.c."""

    _fields_ = [("state", ctypes.c_int32), ("fd", ctypes.c_int32), ("gen", ctypes.c_int32), ("pad", ctypes.c_int32),
                ("deadline_ns", ctypes.c_int64), ("data", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("sent_ns", ctypes.c_int64), ("written", ctypes.c_int64)]


class _CStats(ctypes.Structure):
    """`pp_stats` of harness/_pacer.c."""

    _fields_ = [("raw", ctypes.c_int64), ("cpu_ns", ctypes.c_int64), ("timer_slack_1ns", ctypes.c_int32),
                ("realtime", ctypes.c_int32)]


def _bind(lib: NativeLibrary) -> None:
    """Declare the C pacer's functions: the sleeping one without the GIL, the quick ones with."""
    p, slot = ctypes.c_void_p, ctypes.POINTER(_Slot)
    held, released = lib.held, lib.released
    functions: tuple[tuple[Any, list[Any], Any], ...] = (
            (held.pp_new, [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64], p),
            (held.pp_slots, [p], slot), (held.pp_stats_of, [p], ctypes.POINTER(_CStats)),
            (held.pp_start, [p], ctypes.c_int),
            (held.pp_arm, [p, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int64],
             ctypes.c_int32),
            (held.pp_claim, [slot, ctypes.c_int32], ctypes.c_int), (held.pp_state, [slot], ctypes.c_int32),
            (held.pp_set_state, [slot, ctypes.c_int32], None),
            (held.pp_drain, [p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int32], ctypes.c_int32),
            (released.pp_stop, [p], None), (held.pp_free, [p], None))
    for fn, args, result in functions:
        fn.argtypes, fn.restype = args, result


class _CThread:
    """The C pacer thread (harness/_pacer.c) of one loop: slots armed from the loop; reports of
    the slots it is done with read on the loop from a pipe (`loop.add_reader`: what the loop must
    write now) or drained from a ring as the loop arms the next send (`drain`: the rest)."""

    def __init__(self, lib: NativeLibrary, loop: asyncio.AbstractEventLoop, lead_ns: int, stats: PacerStats) -> None:
        self._lib = lib.held
        self._stop = lib.released.pp_stop
        self._loop = loop
        self._stats = stats
        self._read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._write_fd = write_fd
        self._pacer = self._lib.pp_new(_SLOTS, write_fd, lead_ns)
        if not self._pacer:
            raise MemoryError("the C pacer could not allocate its slots")
        self._slots = ctypes.cast(self._lib.pp_slots(self._pacer), ctypes.POINTER(_Slot * _SLOTS)).contents
        self._free = list(range(_SLOTS - 1, -1, -1))
        self._armed: dict[int, PacedSend] = {}
        self._drained = (ctypes.c_int64 * (4 * _DRAIN))()
        self._pp_arm, self._pp_drain = self._lib.pp_arm, self._lib.pp_drain
        loop.add_reader(self._read_fd, self._reports)
        if self._lib.pp_start(self._pacer) != 0:
            raise OSError("the C pacer thread could not start")

    def arm(self, send: PacedSend) -> bool:
        """Hand `send` to the C thread; False when every slot is taken (the caller keeps it)."""
        self.drain()
        if not self._free:
            return False
        idx = self._free.pop()
        send.slot = idx
        self._armed[idx] = send
        send.gen = self._pp_arm(self._pacer, idx, send.fd, send.deadline_ns, send.request, len(send.request))
        return True

    def withdraw(self, send: PacedSend) -> bool:
        """Take back `send` if the C thread has not claimed it (its descriptor closed here)."""
        self.drain()  # most often its report is in: then it went, and no slot need be read
        if self._armed.get(send.slot) is not send:
            return False  # reported back already: sent (or withdrawn before), its slot since freed
        slot = ctypes.byref(self._slots[send.slot])
        if self._lib.pp_claim(slot, _WITHDRAWN):
            _close_fd(send.fd)
            send.fd = -1
            return True
        while send.fd >= 0 and self._lib.pp_state(slot) == _SENDING:
            time.sleep(0)  # the C thread is writing it: microseconds (a TLS send waits for this loop)
        return False

    def went_at(self, send: PacedSend) -> int:
        """When the C thread wrote `send` (0: not yet), before its report is read."""
        if send.sent_ns or self._armed.get(send.slot) is not send:
            return send.sent_ns
        slot = self._slots[send.slot]
        return int(slot.sent_ns) if slot.state == _SENT else 0

    def _reports(self) -> None:
        """On the loop: each slot the C thread is done with, stamped, completed, freed."""
        try:
            data = os.read(self._read_fd, 1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        reports = array("i", data[: len(data) // 8 * 8])
        for k in range(0, len(reports), 2):
            self._report(reports[k], reports[k + 1])

    def drain(self) -> None:
        """On the loop: the reports of sends done with that needed no wake-up (sent whole, or
        withdrawn; their slots freed by the C side), so each stamps its exchange."""
        out, armed = self._drained, self._armed
        while True:
            n = self._pp_drain(self._pacer, out, _DRAIN)
            for k in range(0, 4 * n, 4):
                idx = out[k]
                send = armed.get(idx)
                if send is None or send.gen != out[k + 1]:
                    continue
                self._done_with(idx, send, out[k + 2])
            if n < _DRAIN:
                return

    def _done_with(self, idx: int, send: PacedSend, sent_ns: int) -> None:
        """Slot `idx` given back: `send` stamped with when the C thread wrote it (0: it did not)."""
        if sent_ns:
            send.fd = -1  # closed by the C thread
            send.sent_ns = sent_ns
            send.stamp(sent_ns)
        del self._armed[idx]
        self._free.append(idx)

    def _report(self, idx: int, gen: int) -> None:
        send = self._armed.get(idx)
        if send is None or send.gen != gen:
            return
        slot = self._slots[idx]
        state = slot.state
        sent_ns = 0
        if state == _SENDING:  # due, and only the loop's transport can write it (TLS)
            send.sent_ns = _now()
            send.stamp(send.sent_ns)
            send.rest(send.request)
            self._stats.via_loop += 1
        elif state == _SENT:
            sent_ns = int(slot.sent_ns)
            written = int(slot.written)
            if written < len(send.request):
                send.rest(send.request[written:])
        self._lib.pp_set_state(ctypes.byref(slot), _FREE)
        self._done_with(idx, send, sent_ns)

    def stop(self) -> None:
        """End the thread, withdraw what it had not sent, read its last reports."""
        self._stop(self._pacer)
        self.drain()
        self._reports_until_empty()
        for send in list(self._armed.values()):
            if self.withdraw(send):
                self._stats.withdrawn += 1
        self._loop.remove_reader(self._read_fd)
        stats = self._lib.pp_stats_of(self._pacer).contents
        self._stats.raw += int(stats.raw)
        self._stats.cpu_s += stats.cpu_ns / 1e9
        self._stats.timer_slack_1ns = bool(stats.timer_slack_1ns)
        self._stats.realtime = bool(stats.realtime)
        self._lib.pp_free(self._pacer)
        os.close(self._read_fd)
        os.close(self._write_fd)

    def _reports_until_empty(self) -> None:
        while True:
            before = len(self._armed)
            self._reports()
            if len(self._armed) == before:
                return


class Pacer:
    """The dedicated sending thread of one event loop. `start()` on the loop; `submit()` arms a
    send; `withdraw()` takes back one not yet sent; `went_at()` says when one went; `stop()`
    withdraws the rest and returns the stats. Deadlines are perf_counter_ns.

    The thread is the C helper's (harness/_pacer.c, built by `harness._native`) where it can be
    built, and a Python thread otherwise (the module docstring); `native=False` asks for the
    Python one."""

    def __init__(self, lead_ns: int | None = None, native: bool = True) -> None:
        self._sleep_until = _absolute_sleep()
        self._lead_ns = lead_ns if lead_ns is not None else _LEAD_NS if self._sleep_until else _RELATIVE_LEAD_NS
        self._heap: list[tuple[int, int, PacedSend]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._c: _CThread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._switch_before: float | None = None
        self.stats = PacerStats()
        self._lib: NativeLibrary | None = None
        if not native:
            self.stats.native_reason = "not asked for"
        elif self._sleep_until is None:
            self.stats.native_reason = "no clock_nanosleep on CLOCK_MONOTONIC here"
        else:
            got = _native.load("pacer")
            if isinstance(got, str):
                self.stats.native_reason = got
            else:
                _bind(got)
                self._lib = got
        self.stats.native = self._lib is not None

    @property
    def running(self) -> bool:
        return self._thread is not None or self._c is not None

    def start(self) -> None:
        """Start the thread (from the loop it serves); a Python thread lowers the GIL's switch interval."""
        if self.running:
            return
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        if self._lib is not None:
            self._c = _CThread(self._lib, self._loop, self._lead_ns, self.stats)
            return
        self._switch_before = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_before, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._run, name="passport-pacer", daemon=True)
        self._thread.start()

    def submit(self, send: PacedSend) -> None:
        """Arm `send`; the thread writes it at its deadline (at once if that has passed)."""
        if send.deadline_ns <= _now():
            self.stats.armed_late += 1
        if self._c is not None and self._c.arm(send):
            return
        with self._cond:
            heapq.heappush(self._heap, (send.deadline_ns, next(self._order), send))
            self._cond.notify()
        if self._c is not None and self._thread is None:  # every C slot taken: a Python thread for the rest
            self._thread = threading.Thread(target=self._run, name="passport-pacer-overflow", daemon=True)
            self._thread.start()

    def withdraw(self, send: PacedSend) -> bool:
        """Take back `send` if it has not gone (True); waits for a write under way to finish."""
        if send.slot >= 0:
            assert self._c is not None
            if not self._c.withdraw(send):
                return False
        else:
            with send.lock:
                if send.state != _ARMED:
                    return False
                send.state = _WITHDRAWN
            self._close(send)
        self.stats.withdrawn += 1
        return True

    def drain(self) -> None:
        """On the loop: take in what the C thread reported without waking it (each exchange stamped)."""
        if self._c is not None:
            self._c.drain()

    def went_at(self, send: PacedSend) -> int:
        """When `send`'s bytes went (0: they have not); on the loop, even before the thread's report."""
        if send.slot >= 0 and self._c is not None:
            return self._c.went_at(send)
        return send.sent_ns

    def stop(self) -> PacerStats:
        """Withdraw what is still armed, end the thread, restore the switch interval."""
        with self._cond:
            self._stopping = True
            pending = [s for _, _, s in self._heap]
            self._heap.clear()
            self._cond.notify()
        for send in pending:
            self.withdraw(send)
        if self._c is not None:
            self._c.stop()
            self._c = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._switch_before is not None:
            sys.setswitchinterval(self._switch_before)
            self._switch_before = None
        return self.stats

    # -- the Python thread --------------------------------------------------------------------
    def _run(self) -> None:
        self.stats.timer_slack_1ns = _fine_timer_slack() or self.stats.timer_slack_1ns
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
            self.stats.cpu_s += time.thread_time() - cpu0

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
            send.sent_ns = _now()
            send.stamp(send.sent_ns)
            # an error (-1) is met again by the transport's own write, which fails the exchange
            written = max(0, _write(send.fd, send.request, len(send.request)))
            send.state = _SENT
        self._close(send)
        self.stats.raw += 1
        if written < len(send.request):
            self._loop.call_soon_threadsafe(send.rest, send.request[written:])

    @staticmethod
    def _send_on_loop(send: PacedSend) -> None:
        send.sent_ns = _now()
        send.stamp(send.sent_ns)
        send.rest(send.request)
        send.state = _SENT

    @staticmethod
    def _close(send: PacedSend) -> None:
        if send.fd >= 0:
            _close_fd(send.fd)
            send.fd = -1
