"""What reaches a person's terminal: no control sequence a server wrote.

A model id, an error body, a canary's answer or an engine's log line is text an endpoint chose; on
a terminal its escape sequences can move the cursor, erase a line (a model id ending in `ESC[2K`
erased "Result is: INVALID"), retitle the window or hide text. While a command runs, a stream that
is a terminal shows every control character but newline and tab as a visible escape (`\\x1b`),
whatever printed it. Output that is not a terminal (a file, a pipe, a CI log, `export > file`) is
left as it is: data stays data. The progress bar, whose text is ours, draws on the stream beneath.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TextIO

__all__ = ["visible", "TerminalGuard", "guarded_terminal", "beneath"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """`text` with every control character but newline and tab written as an escape."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


class TerminalGuard:
    """A text stream that writes `visible(text)` to the terminal beneath it (`raw`)."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(visible(text))
        return len(text)

    def __getattr__(self, name: str) -> object:  # flush, isatty, fileno, encoding, ...: the terminal's own
        return getattr(self.raw, name)


def beneath(stream: TextIO) -> TextIO:
    """The stream a guard writes to (for our own drawing, the progress bar), or `stream` itself."""
    return stream.raw if isinstance(stream, TerminalGuard) else stream


@contextlib.contextmanager
def guarded_terminal() -> Iterator[None]:
    """sys.stdout and sys.stderr guarded where they are terminals, for the block's duration."""
    saved = sys.stdout, sys.stderr
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        isatty = getattr(stream, "isatty", None)
        if isatty is not None and isatty() and not isinstance(stream, TerminalGuard):
            setattr(sys, name, TerminalGuard(stream))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
