"""server_counters where one request is several to the engine (rules version 12): vLLM counts each
input of an embeddings batch, and each document of a rerank request and its query, as requests of
their own. Hand-computed bounds on a small log."""

from __future__ import annotations

import pyarrow as pa

from passport.audit._counters import AFTER, BEFORE, counter_facts


def _log(n_inputs: list[int], outcomes: list[str]) -> pa.Table:
    n = len(outcomes)
    return pa.table({"outcome": outcomes, "completion_tokens": [0] * n, "tokens_source": ["server"] * n,
                     "max_tokens": [8] * n, "n_inputs": n_inputs})


def _bracket(finished: float) -> pa.Table:
    return pa.table({"source": [BEFORE, AFTER, BEFORE, AFTER],
                     "name": ["requests_finished_total"] * 2 + ["generation_tokens_total"] * 2,
                     "value": [100.0, 100.0 + finished, 0.0, 0.0]})


def test_a_rerank_request_may_count_as_its_documents_and_its_query() -> None:
    log = _log([8, 8, 5], ["ok", "ok", "error"])  # two answered, one failed after it was sent
    facts = counter_facts(log, _bracket(18), None, None, api="rerank")
    assert facts is not None
    assert (facts.server_requests, facts.sure_requests) == (18, 2)
    assert facts.possible_requests == 9 + 9 + 6  # each document and the query, the failed one's too
    assert facts.fan_out == "documents and the query"
    embedded = counter_facts(log, _bracket(18), None, None, api="embeddings")
    assert embedded is not None and embedded.possible_requests == 8 + 8 + 5 and embedded.fan_out == "inputs"


def test_without_the_kind_each_request_counts_once_as_before_version_12() -> None:
    log = _log([8, 8, 5], ["ok", "ok", "error"])
    for api in (None, "chat"):
        facts = counter_facts(log, _bracket(18), None, None, api=api)
        assert facts is not None and facts.possible_requests == 3 and facts.fan_out is None
