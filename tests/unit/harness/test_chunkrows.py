"""The chunks table built a part at a time (`harness._chunkrows`), against rows written out by
hand: request ids, chunk numbers, receive times on the run clock, kinds, characters, event names,
payloads, a secret scrubbed in the one answer that echoed it, and nulls where text is not kept."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness import CHUNKS_SCHEMA, SSEParser, TableWriter, chunk_columns, summarize
from harness._chunkrows import AnswerChunks
from harness._redact import register_secret

SECRET = "sk-chunkrows-0123456789abcdef"


def _answer(rid: int, raw: bytes, reads: list[tuple[int, int]], full_text: bool = True) -> AnswerChunks:
    """An answer whose body arrives in reads (end offset, time) and is judged as the runner does."""
    sse, start = SSEParser(), 0
    for end, t_ns in reads:
        sse.feed(raw[start:end], t_ns)
        start = end
    summary = summarize(sse, "completions")
    return AnswerChunks(rid, sse, summary.kinds, summary.n_chars, 1_000, full_text)


def _rows(tmp_path: Path, answers: list[AnswerChunks]) -> list[dict[str, object]]:
    writer = TableWriter(tmp_path, "chunks", CHUNKS_SCHEMA, build_items=chunk_columns)
    for a in answers:
        writer.append_item(a, len(a.kinds))
    writer.close()
    return pq.read_table(tmp_path / "chunks.parquet").to_pylist()


def test_a_part_of_answers_becomes_the_rows_written_out_by_hand(tmp_path: Path) -> None:
    register_secret(SECRET)
    one = b'data: {"choices":[{"text":"ab"}]}\n\ndata: {"choices":[{"text":"c","finish_reason":"length"}]}\n\n' \
          b"data: [DONE]\n\n"
    named = b'event: note\ndata: {"choices":[{"text":"x"}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":1}}\n\n'
    leaky = b'data: {"choices":[{"text":"key ' + SECRET.encode() + b'"}]}\n\ndata: [DONE]\n\n'
    quiet = b'data: {"choices":[{"text":"hi"}]}\n\ndata: [DONE]\n\n'
    first_end = one.index(b"\n\n") + 2
    answers = [
        _answer(7, one, [(first_end, 5_000), (len(one), 9_000)]),  # two reads: the first event alone
        _answer(8, named, [(len(named), 20_000)]),
        _answer(9, leaky, [(len(leaky), 30_000)]),
        _answer(10, quiet, [(len(quiet), 40_000)], full_text=False),
    ]
    rows = _rows(tmp_path, answers)
    got = [(r["request_id"], r["seq"], r["recv_ns"], r["kind"], r["token_bearing"], r["n_chars"], r["event"])
           for r in rows]
    assert got == [
        (7, 0, 4_000, "content", True, 2, None),
        (7, 1, 8_000, "content", True, 1, None),
        (7, 2, 8_000, "done", False, 0, None),
        (8, 0, 19_000, "content", True, 1, "note"),
        (8, 1, 19_000, "usage", False, 0, None),
        (9, 0, 29_000, "content", True, 4 + len(SECRET), None),
        (9, 1, 29_000, "done", False, 0, None),
        (10, 0, 39_000, "content", True, 2, None),
        (10, 1, 39_000, "done", False, 0, None),
    ]
    data = [r["data"] for r in rows]
    assert data[:5] == [b'{"choices":[{"text":"ab"}]}', b'{"choices":[{"text":"c","finish_reason":"length"}]}',
                        b"[DONE]", b'{"choices":[{"text":"x"}]}', b'{"choices":[],"usage":{"prompt_tokens":1}}']
    assert SECRET.encode() not in data[5] and b"***" in data[5] and data[6] == b"[DONE]"
    assert data[7:] == [None, None]  # text not kept for this answer


@pytest.mark.parametrize("secret_in", [None, 0, 2])
def test_only_an_answer_holding_a_secret_is_scrubbed(tmp_path: Path, secret_in: int | None) -> None:
    register_secret(SECRET)
    bodies = []
    for k in range(3):
        text = f"key {SECRET}" if k == secret_in else f"plain {k}"
        bodies.append(('data: {"choices":[{"text":"' + text + '"}]}\n\n').encode())
    rows = _rows(tmp_path, [_answer(k, b, [(len(b), 10)]) for k, b in enumerate(bodies)])
    for k, row in enumerate(rows):
        data = row["data"]
        assert isinstance(data, bytes)
        assert (b"***" in data) == (k == secret_in) and SECRET.encode() not in data
        if k != secret_in:
            assert data == bodies[k][6:-2]
