"""exact_input_lengths (rules version 3): the server's prompt count against ours, so `--input-len
64` reaching the server as 88 tokens (the chat template) is stated, not hidden behind a PASS."""

from __future__ import annotations

from typing import Any, cast

import pyarrow as pa

from passport.audit import COUNT_NAMES, NO_CANARIES, RunFacts, evaluate
from passport.audit._derive import _input_overhead
from passport.audit._types import ResultsFigures, ValidityLimits
from passport.model import ValiditySpec


def _rule(exact: bool, overhead: tuple[int, int, int] | None) -> dict[str, Any]:
    facts = RunFacts(complete=True, incomplete_reason=None, open_loop=False, launched_engine=False, git_dirty=False,
                     exact_lengths=exact, canaries=NO_CANARIES, forced=False, input_overhead=overhead)
    results = cast(ResultsFigures, {"client": {"dispatch_lag_p99_ms": None, "cpu_share_max": None,
                                               "loop_lag_p99_ms": None}})
    counts: dict[str, int | None] = {name: 0 for name in COUNT_NAMES}
    rules = evaluate(results, counts, facts, cast(ValidityLimits, ValiditySpec().model_dump()))
    return dict(next(r for r in rules if r["name"] == "exact_input_lengths"))


def test_a_fixed_template_overhead_passes_and_is_stated() -> None:
    rule = _rule(True, (24, 24, 16))
    assert rule["status"] == "PASS"
    assert "the server counted +24 tokens on each of 16 requests (special tokens such as BOS, and on the chat API" \
        in rule["message"]


def test_a_varying_difference_warns_that_the_server_tokenizes_differently() -> None:
    rule = _rule(True, (1, 5, 16))
    assert rule["status"] == "WARN" and rule["measured"] == "+1..+5"
    assert "not a fixed template overhead" in rule["message"] and "tokenizer" in rule["recommendation"]


def test_no_tokenizer_still_warns() -> None:
    assert _rule(False, None)["status"] == "WARN"


def test_the_overhead_is_read_from_measured_successes_of_single_turn_text() -> None:
    table = pa.table({"phase": ["warmup", "measure", "measure", "measure"], "repetition": [0, 0, 0, 0],
                      "outcome": ["ok", "ok", "ok", "http_error"], "prompt_tokens": [90.0, 88.0, 88.0, None],
                      "input_tokens_client": [64.0, 64.0, 64.0, 64.0]})
    assert _input_overhead(table, {"workload": {}}, []) == (24, 24, 2)
    # turns carry the history the server counts and we do not: not compared
    assert _input_overhead(table, {"workload": {"sessions": {"turns": 3}}}, []) is None
