"""itl.token's parts on hand-built chunks, and guidellm's weighted statistics on hand-computed
samples."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from passport.audit import itl_gaps_by_request
from passport.audit._metrics import itl_samples_by_request, tokens_per_chunk
from passport.audit._views import _summary, inverse_cdf


def test_tokens_are_shared_by_characters_in_whole_tokens_at_least_one_a_chunk() -> None:
    # the simulator's "tok0 ", then "tok1 tok2 tok3 tok4 ", ... "tok9 tok10 tok11 tok12 "
    assert tokens_per_chunk(np.array([5, 20, 20, 23]), 13).tolist() == [1, 4, 4, 4]
    assert tokens_per_chunk(np.array([5, 20, 20, 23, 24, 24, 24, 24, 24]), 33).tolist() == [1] + [4] * 8
    assert tokens_per_chunk(np.array([0, 0, 0]), 7).tolist() == [3, 2, 2]  # no characters: even, earlier first
    assert tokens_per_chunk(np.array([1, 1, 100]), 4).tolist() == [1, 1, 2]  # the floor of one gives back


@given(st.lists(st.integers(0, 200), min_size=1, max_size=30), st.integers(0, 300))
def test_every_token_is_placed_once_and_every_chunk_keeps_one(chars: list[int], extra: int) -> None:
    k = tokens_per_chunk(np.array(chars, dtype=float), len(chars) + extra)
    assert int(k.sum()) == len(chars) + extra and (k >= 1).all()


@given(st.lists(st.integers(1, 8), min_size=1, max_size=30), st.integers(1, 6))
def test_chunks_whose_tokens_are_all_as_long_get_their_own_counts(counts: list[int], chars_per_token: int) -> None:
    chars = np.array(counts) * chars_per_token
    assert tokens_per_chunk(chars, sum(counts)).tolist() == counts


def _chunks(rows: list[tuple[int, int, float, int]]) -> pa.Table:
    """(request id, seq, recv ms, characters) of token-bearing chunks, plus one role-only chunk."""
    rid, seq, t, chars = (list(c) for c in zip(*rows))
    return pa.table({"request_id": rid + [rid[0]], "seq": seq + [99], "recv_ns": [int(x * 1e6) for x in t] + [0],
                     "token_bearing": [True] * len(rows) + [False], "n_chars": chars + [0]})


def test_a_chunk_of_k_tokens_gives_k_samples_of_its_gap_over_k() -> None:
    chunks = _chunks([(1, 0, 100.0, 5), (1, 1, 112.0, 20), (1, 2, 124.0, 20), (1, 3, 130.0, 5),  # 1+4+4+1 tokens
                      (2, 0, 50.0, 6), (2, 1, 60.0, 6), (2, 2, 75.0, 6),  # one token a chunk
                      (3, 0, 10.0, 9), (3, 1, 30.0, 9)])  # no usage and no count
    ids = np.array([1, 2, 3])
    token = itl_samples_by_request(chunks, ids, np.array([10.0, 3.0, np.nan]))[1]
    assert token[1] == pytest.approx([3.0e-3] * 8 + [6.0e-3])
    chunk = itl_gaps_by_request(chunks, ids)
    assert token[2] == pytest.approx(chunk[2]) and chunk[2] == pytest.approx([10e-3, 15e-3])
    assert token[3] == pytest.approx(chunk[3]) and chunk[3] == pytest.approx([20e-3])
    # a count below the chunks (an engine's usage that disagrees) keeps one token a chunk
    assert itl_samples_by_request(chunks, ids, np.array([2.0, 3.0, 1.0]))[1][1] == pytest.approx(chunk[1])


def test_guidellm_statistics_weigh_each_sample() -> None:
    values = np.array([3.0, 12.0, 4.8])
    weights = np.array([16.0, 1.0, 5.0])  # output tokens - 1 of three requests
    out = _summary(values, ("mean", "median", "p99", "min", "max", "std"), lower=True, weights=weights)
    assert out["mean"] == pytest.approx((3.0 * 16 + 12.0 + 4.8 * 5) / 22)
    assert out["median"] == 3.0 and out["p99"] == 12.0  # 16/22 of the mass at 3.0; the last 1/22 at 12.0
    assert inverse_cdf(values, 0.8, weights) == 4.8  # 16/22 = 0.727 < 0.8 <= 21/22
    assert (out["min"], out["max"]) == (3.0, 12.0)
    mean = out["mean"]
    assert out["std"] == pytest.approx(np.sqrt(((values - mean) ** 2 * weights).sum() / 22))
    # a sample of weight 0 (a one-token answer's ITL) is left out, as guidellm leaves it
    assert _summary(np.array([3.0, 99.0]), ("max",), lower=True, weights=np.array([2.0, 0.0]))["max"] == 3.0


@given(st.lists(st.tuples(st.lists(st.integers(0, 40), min_size=1, max_size=8), st.integers(-2, 12)),
                min_size=1, max_size=12))
def test_every_request_at_once_gives_each_request_its_own_samples(requests: list[tuple[list[int], int]]) -> None:
    # each request: its chunks' characters, and its output tokens as extra tokens over its chunk count
    # (negative: fewer than its chunks, a count that disagrees; -2: unknown)
    rows, tokens = [], []
    for rid, (chars, extra) in enumerate(requests):
        rows += [(rid, seq, 1000.0 * rid + 7.0 * seq * seq + seq, c) for seq, c in enumerate(chars)]
        tokens.append(np.nan if extra == -2 else float(len(chars) + extra))
    ids = np.arange(len(requests), dtype=float)
    chunk, token = itl_samples_by_request(_chunks(rows), ids, np.array(tokens))
    for rid, (chars, _) in enumerate(requests):
        gaps = np.diff([1000.0 * rid + 7.0 * s * s + s for s in range(len(chars))]) / 1e3
        assert chunk[rid] == pytest.approx(gaps)
        n = tokens[rid]
        if not n > len(chars):  # unknown, or one token a chunk
            assert token[rid] == pytest.approx(gaps)
            continue
        k = tokens_per_chunk(np.array(chars, dtype=float), int(n))[1:]  # the one-request rule, by hand
        assert token[rid] == pytest.approx(np.repeat(gaps / k, k))
