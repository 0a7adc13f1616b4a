"""`passport capacity`: the worked example of the issue and hand-computed configs."""

from __future__ import annotations

import json

import pytest

from passport.plan import (
    Budget,
    GiB,
    KiB,
    MiB,
    architecture_from_config,
    compute,
    implied_state_per_sequence,
    load_config,
)
from tests.conftest import REPO, run_cli

CONFIGS = REPO / "tests" / "data" / "configs"


def test_worked_example_pool_tokens_naive_sessions_and_the_per_sequence_term() -> None:
    pool, kv = 23.3 * GiB, 64 * KiB
    naive = compute(None, Budget(kv_pool_bytes=pool), 32768, kv_bytes_per_token=kv, state_bytes_per_sequence=0)
    assert naive.pool_tokens == 381_747 and round(naive.pool_tokens, -2) == 381_700
    assert naive.sequences_naive == 11
    state = implied_state_per_sequence(pool, kv, 36, 8192)
    assert state / MiB == pytest.approx(150.76, abs=0.01)  # "roughly 150 MiB per sequence"
    at_8k = compute(None, Budget(kv_pool_bytes=pool), 8192, kv_bytes_per_token=kv, state_bytes_per_sequence=state)
    assert (at_8k.sequences_naive, at_8k.sequences_with_state) == (46, 36)
    at_32k = compute(None, Budget(kv_pool_bytes=pool), 32768, kv_bytes_per_token=kv, state_bytes_per_sequence=state)
    assert (at_32k.sequences_naive, at_32k.sequences_with_state) == (11, 10)


def test_cli_shows_both_numbers_and_the_term_between_them() -> None:
    result = run_cli("capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "8192",
                     "--published-sequences", "36")
    assert result.returncode == 0, result.stderr
    assert "pool holds 381,747 tokens" in result.stdout
    assert "naive division: 46" in result.stdout and "implied fixed state per sequence" in result.stdout
    # derived from the published figure, not given: the label says which (it said "(given)")
    assert "fixed state per sequence: 150.76 MiB (implied by the published figure)" in result.stdout
    given = run_cli("capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "8192",
                    "--state-mib-per-sequence", "150")
    assert "fixed state per sequence: 150.00 MiB (given)" in given.stdout
    assert result.stdout.rstrip().endswith("46 sequences of 8,192 tokens by naive division, 36 charging 150.8 MiB of "
                                           "fixed state per sequence")
    as_json = json.loads(run_cli("capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context",
                                 "32768", "--json").stdout)
    assert as_json["pool_tokens"] == 381_747 and as_json["sequences_naive"] == 11


def test_linear_attention_state_from_a_config_json_read_offline() -> None:
    arch = architecture_from_config(load_config(CONFIGS / "qwen3-next-like"), n_params=3e9)
    assert (arch.full_attention_layers, arch.linear_layers, arch.kv_heads, arch.head_dim) == (2, 6, 2, 256)
    # 32 value heads x 128 x 128 x 4 B + (2 x 16 x 128 + 32 x 128) x (4 - 1) x 4 B
    assert arch.linear_state_bytes_per_layer == 32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 3 * 4
    report = compute(arch, Budget(weight_dtype="bf16", kv_dtype="bf16", gpu_memory_bytes=24 * GiB, utilization=0.9,
                                  reserve_bytes=1 * GiB), 32768)
    assert report.kv_bytes_per_token == 2 * 2 * 2 * 256 * 2  # layers x (K, V) x heads x dim x bf16
    assert report.weight_bytes == 6e9
    assert report.pool_bytes == pytest.approx(24 * GiB * 0.9 - 6e9 - GiB)
    assert report.state_bytes_per_sequence == 6 * arch.linear_state_bytes_per_layer
    assert report.sequences_with_state < report.sequences_naive


def test_sliding_window_layers_are_charged_their_window_per_sequence() -> None:
    arch = architecture_from_config(load_config(CONFIGS / "gemma3-270m-like" / "config.json"))
    assert (arch.full_attention_layers, arch.sliding_layers, arch.sliding_window) == (3, 15, 512)
    report = compute(arch, Budget(kv_dtype="f16", kv_pool_bytes=GiB), 4096)
    assert report.kv_bytes_per_token == 3 * 2 * 1 * 256 * 2
    assert report.state_bytes_per_sequence == 15 * 512 * 2 * 256 * 2
    short = compute(arch, Budget(kv_dtype="f16", kv_pool_bytes=GiB), 256)
    assert short.state_bytes_per_sequence == 15 * 256 * 2 * 256 * 2  # a window longer than the context


def test_weights_that_leave_nothing_for_the_cache_are_a_clear_error() -> None:
    result = run_cli("capacity", "--config", str(CONFIGS / "qwen3-next-like"), "--params", "80e9", "--weights",
                     "bf16", "--gpu-memory-gib", "80", "--context", "8192")
    assert result.returncode == 2 and "nothing is left for the KV cache" in result.stderr


def test_the_worked_case_fits_one_card_and_prices_a_month_both_ways() -> None:
    # 200 daily users, ~8K-token conversations on an 80 GB card: a 23.3 GiB pool holding 36 live 8K
    # sequences (the published figure); 20 live at peak; 200 M input + 40 M output tokens a month
    result = run_cli("capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "8192",
                     "--published-sequences", "36", "--live-sequences", "20", "--monthly-input-mtok", "200",
                     "--monthly-output-mtok", "40", "--input-usd-per-million", "0.45", "--output-usd-per-million",
                     "3.20", "--gpu-hour-usd", "2.5")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "=> 20 live sequences needed, 36 fit: one replica suffices" in out
    assert "= USD 218.00 per month" in out  # 200 x 0.45 + 40 x 3.20
    assert "x USD 2.5/h x 730 h = USD 1,825.00 per month" in out
    assert "break-even: 2,009 M tokens per month" in out and "the managed option is cheaper" in out  # 1825 / (218/240)
    refused = run_cli("capacity", "--kv-pool-gib", "23.3", "--kv-kib-per-token", "64", "--context", "8192",
                      "--monthly-input-mtok", "200", "--input-usd-per-million", "0.45")
    assert refused.returncode == 2
    assert "give both --input-usd-per-million and --output-usd-per-million" in refused.stderr
