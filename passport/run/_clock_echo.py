"""Clock offsets between this process and a worker on another host, from direct round trips.

A worker (a Ray actor) starts a `ClockEcho`: a thread answering each byte it receives on a TCP
connection with its host's `perf_counter_ns()`. The coordinator connects straight to it and times
many round trips (`measure_offset`): for each, the remote stamp lies somewhere between the local
send and receive, so offset = remote - midpoint is wrong by at most half that round trip; the
fastest round trip gives the tightest guarantee. Ray's own calls go through its scheduler and
cost a millisecond or more each, too coarse to bound an offset within 1 ms on a busy machine; a
bare socket on loopback returns in tens of microseconds.

Limits: the bound holds only if the two clocks do not drift during the probes (they last a few
milliseconds); an echo port a firewall blocks raises `OSError` and the caller falls back to
slower round trips, saying so in the record.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable

__all__ = ["ClockEcho", "measure_offset", "PROBES"]

PROBES = 200  # round trips per estimate; the fastest is kept
_STAMP = struct.Struct("!q")


class ClockEcho:
    """A daemon thread serving one connection at a time on (host, an ephemeral port): each byte
    received is answered with 8 bytes, this host's `perf_counter_ns()` (or `clock_ns()`), big-endian."""

    def __init__(self, host: str, clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self._clock_ns = clock_ns
        self._sock = socket.create_server((host, 0))
        self.address: tuple[str, int] = (host, int(self._sock.getsockname()[1]))
        threading.Thread(target=self._serve, name="passport-clock-echo", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.settimeout(5.0)
                with contextlib.suppress(OSError):
                    while conn.recv(1):
                        conn.sendall(_STAMP.pack(self._clock_ns()))

    def close(self) -> None:
        self._sock.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise OSError("the clock echo closed the connection")
        data += more
    return data


def measure_offset(address: tuple[str, int], probes: int = PROBES, timeout_s: float = 5.0) -> tuple[int, int]:
    """(offset of the echo's clock from ours, its uncertainty) in ns, from the fastest of `probes`
    round trips: offset = remote - midpoint, uncertainty = half that round trip. Raises `OSError`
    when the echo cannot be reached."""
    best: tuple[int, int] | None = None
    with socket.create_connection(address, timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(probes):
            sent = time.perf_counter_ns()
            sock.sendall(b"t")
            remote = _STAMP.unpack(_recv_exactly(sock, _STAMP.size))[0]
            back = time.perf_counter_ns()
            sample = (remote - (sent + back) // 2, (back - sent + 1) // 2)
            if best is None or sample[1] < best[1]:
                best = sample
    assert best is not None
    return best
