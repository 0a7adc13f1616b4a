"""The chunks table's rows, built a part at a time in the recorder's writer thread.

The event loop hands over each answer as it is (`AnswerChunks`: its request id, its SSE parser,
the kinds and characters the judgement found, the run's clock origin) and `chunk_columns` turns a
part's answers into columns at once: request ids repeated, chunk numbers, receive times on the
run clock, kinds, token-bearing flags, characters, event names and payloads. Building them per
answer on the loop (eight small numpy arrays each) cost about 30 us of its CPU per request at
2,000 requests/s (benchmarks/budget.py); built per part, a few microseconds, off the loop.

Secrets: the part's payloads are searched once, joined (`has_secret`); only when something is
found is each answer searched, and the payloads of one that may hold a secret are scrubbed one by
one (`scrub_bytes`), as before. A secret never reaches the file: the search runs before the part
is converted.
"""

from __future__ import annotations

from array import array
from typing import Any, NamedTuple

import numpy as np

from harness._openai import ChunkKind
from harness._redact import has_secret, scrub_bytes
from harness._sse import SSEParser

__all__ = ["AnswerChunks", "chunk_columns"]

# token_bearing by chunk kind, looked up in one step
_TOKEN_BEARING = np.array([k in (ChunkKind.CONTENT, ChunkKind.REASONING, ChunkKind.TOOL_CALL) for k in range(128)])


class AnswerChunks(NamedTuple):
    """One answer's events, as the loop hands them over (nothing copied or converted)."""

    request_id: int
    sse: SSEParser  # split already (the judgement split it); the loop no longer touches it
    kinds: array[int]  # ChunkKind per event ('b')
    n_chars: array[int]  # characters per event ('i')
    t0_ns: int  # the run clock's origin: recv_ns is the event's time less this
    full_text: bool  # payloads recorded (else null)


def chunk_columns(answers: list[AnswerChunks]) -> dict[str, list[Any]]:
    """Every column of CHUNKS_SCHEMA for `answers`, in order, as `harness._recorder.piece_array`'s
    pieces: one numpy array or list of values per column; `data` one piece per answer
    (`EventBodies`, or a list of payloads)."""
    counts = np.fromiter((len(a.kinds) for a in answers), dtype=np.int64, count=len(answers))
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    request_id = np.repeat(np.fromiter((a.request_id for a in answers), dtype=np.int64, count=len(answers)), counts)
    seq = (np.arange(total, dtype=np.int64) - np.repeat(starts, counts)).astype(np.int32)
    times = [a.sse.times_ns - a.t0_ns for a in answers]
    recv_ns = np.concatenate(times) if times else np.zeros(0, np.int64)
    kinds = np.frombuffer(b"".join(a.kinds for a in answers), dtype=np.int8)
    n_chars = np.frombuffer(b"".join(a.n_chars for a in answers), dtype=np.int32)
    if any(a.sse.event_names for a in answers):
        events: list[str | None] = [a.sse.event_names.get(i) for a in answers for i in range(len(a.kinds))]
    else:
        events = [None] * total
    return {"request_id": [request_id], "seq": [seq], "recv_ns": [recv_ns], "kind": [kinds],
            "token_bearing": [_TOKEN_BEARING[kinds]], "n_chars": [n_chars], "event": [events],
            "data": _payloads(answers)}


def _payloads(answers: list[AnswerChunks]) -> list[Any]:
    """The `data` column's pieces, one per answer; a recorded answer that may hold a secret has
    each payload scrubbed; one whose text is not recorded, nulls."""
    recorded = [a for a in answers if a.full_text]
    suspect = bool(recorded) and has_secret(b"".join(a.sse.body() for a in recorded))
    pieces: list[Any] = []
    for a in answers:
        if not a.full_text:
            pieces.append([None] * len(a.kinds))
        elif suspect and has_secret(a.sse.body()):
            pieces.append(a.sse.data_piece(scrub_bytes))
        else:
            pieces.append(a.sse.data_piece())
    return pieces
