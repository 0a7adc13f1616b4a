"""Signals while a passport is being written: counted and announced, never raised.

Once anything was timed, the passport of what was recorded is the product: a second Ctrl-C (or a
SIGTERM from a CI runner) must not throw it away. Inside `Interrupts`, SIGINT and SIGTERM only
say that the passport is still being written; the CLI then reports how many requests were kept.
Only the main thread can take signals; elsewhere (a test calling `execute` from a thread) this
does nothing.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from passport.run._stages import Say

__all__ = ["Interrupts"]


class Interrupts:
    def __init__(self, say: Say) -> None:
        self.say = say
        self.count = 0
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.say(f"{signal.Signals(signum).name} received: still writing the passport of what was recorded")

    def arm(self) -> None:
        """(Re)install the handlers: an event loop run inside resets SIGINT when it closes."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.signal(sig, self._handle)
                self._previous.setdefault(sig, previous)

    def __enter__(self) -> Interrupts:
        self.arm()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
