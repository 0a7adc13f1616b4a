"""Accuracy figures and the accuracy_drop rule: intervals and p-values against SciPy, figures from
a hand-built accuracy.parquet, verdicts re-scored from the answers, and the rule judged on A/A
cases (a server as often wrong loaded as alone) and on a real drop."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from scipy import stats

from passport.audit import ACCURACY_SCHEMA, accuracy_figures, sign_test_p, wilson_95
from passport.audit._derive import NO_CANARIES
from passport.audit._validity import RULE_DOCS, RULES, RunFacts, _accuracy_drop

DECLARED = {"max_drop": 0.02, "alpha": 0.05, "on_drop": "warn"}


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (47, 50), (1, 1), (120, 400)])
def test_wilson_matches_scipy(k: int, n: int) -> None:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="wilson")
    assert wilson_95(k, n) == pytest.approx((ci.low, ci.high), abs=1e-9)


@pytest.mark.parametrize(("worse", "better"), [(0, 0), (5, 0), (3, 3), (8, 1), (1, 8), (20, 11)])
def test_sign_test_matches_scipy(worse: int, better: int) -> None:
    want = 1.0 if worse + better == 0 else stats.binomtest(worse, worse + better, 0.5, alternative="greater").pvalue
    assert sign_test_p(worse, better) == pytest.approx(want, rel=1e-12)


def _row(item: str, phase: str, content: str, reference: str = "7", outcome: str = "ok", sent_ns: int = 0,
         correct: bool | None = None, set_name: str = "s") -> dict[str, Any]:
    return {"set": set_name, "set_sha256": "h", "item_id": item, "phase": phase, "scorer": "numeric",
            "reference": reference, "tolerance": None, "prompt": "p", "content": content, "extracted": None,
            "correct": correct, "outcome": outcome, "error": None, "http_status": 200, "finish_reason": "stop",
            "completion_tokens": 3, "max_tokens": 8, "in_flight": 4, "sent_ns": sent_ns, "end_ns": sent_ns + 1}


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ACCURACY_SCHEMA)


def test_figures_from_a_hand_built_table() -> None:
    rows = [_row("a", "alone", "7"), _row("b", "alone", "7"), _row("c", "alone", "6"), _row("d", "alone", "7"),
            _row("a", "under_load", "8", sent_ns=5), _row("a", "under_load", "7", sent_ns=9),  # first answer counts
            _row("b", "under_load", "7"), _row("c", "under_load", "7"),
            _row("d", "under_load", "", outcome="timeout")]  # no answer: failed, not wrong, not paired
    s = accuracy_figures(_table(rows))["s"]  # type: ignore[index]
    assert s["alone"] == {"n": 4, "correct": 3, "failed": 0, "accuracy": 0.75,
                          "ci_low": pytest.approx(wilson_95(3, 4)[0]), "ci_high": pytest.approx(wilson_95(3, 4)[1])}
    assert (s["under_load"]["n"], s["under_load"]["correct"], s["under_load"]["failed"]) == (4, 3, 1)
    paired = s["paired"]
    assert paired is not None
    # pairs a (right, wrong first), b (right, right), c (wrong, right): drop (1 + 0 - 1) / 3
    assert (paired["n_pairs"], paired["worse"], paired["better"], paired["changed"]) == (3, 1, 1, ["a"])
    assert paired["drop"] == pytest.approx(0.0)
    assert paired["p_value"] == pytest.approx(0.75)
    assert s["n_items"] == 4 and s["rescored_differ"] == 0


def test_stored_verdicts_are_never_trusted() -> None:
    rows = [_row("a", "alone", "6", correct=True), _row("b", "alone", "7", correct=True)]
    s = accuracy_figures(_table(rows))["s"]  # type: ignore[index]
    assert s["alone"]["correct"] == 1  # type: ignore[index]
    assert s["rescored_differ"] == 1


def _facts(declared: dict[str, Any] | None) -> RunFacts:
    return RunFacts(complete=True, incomplete_reason=None, open_loop=False, launched_engine=False, git_dirty=False,
                    exact_lengths=False, canaries=NO_CANARIES, forced=False, accuracy=declared)


def _rule(sets: dict[str, Any] | None, declared: dict[str, Any] | None = DECLARED) -> dict[str, Any] | None:
    """The accuracy_drop rule (None: not listed)."""
    found = _accuracy_drop({"accuracy": sets}, {}, _facts(declared), {})  # type: ignore[arg-type, typeddict-item]
    return dict(found[0]) if found else None


def _run(p_alone: list[float], p_loaded: list[float], rng: random.Random) -> dict[str, Any]:
    rows = []
    for i, (a, b) in enumerate(zip(p_alone, p_loaded)):
        rows.append(_row(f"i{i}", "alone", "7" if rng.random() < a else "0"))
        rows.append(_row(f"i{i}", "under_load", "7" if rng.random() < b else "0"))
    return accuracy_figures(_table(rows))  # type: ignore[return-value]


def test_a_a_a_server_as_often_wrong_loaded_as_alone_is_rarely_flagged() -> None:
    """2,000 simulated runs of 50 items, each item right with its own chance (0.5-0.99) alone and
    under load alike: the rule must warn in at most alpha of them."""
    rng = random.Random(7)
    warned = 0
    for _ in range(2000):
        chances = [rng.uniform(0.5, 0.99) for _ in range(50)]
        if _rule(_run(chances, chances, rng))["status"] != "PASS":  # type: ignore[index]
            warned += 1
    assert warned / 2000 <= 0.05


def _sets(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"set{k}": figures["s"] for k, figures in enumerate(runs)}


def test_a_a_four_sets_are_not_four_chances_of_a_false_alarm() -> None:
    """1,000 simulated runs of four sets of 25 items each, wrong with chance 0.1 alone and loaded
    alike (the benchmark's A/A): Holm over the sets keeps the run's false WARN rate under alpha."""
    rng = random.Random(9)
    warned = sum(_rule(_sets([_run([0.9] * 25, [0.9] * 25, rng) for _ in range(4)]))["status"] != "PASS"  # type: ignore[index]
                 for _ in range(1000))
    assert warned / 1000 <= 0.05


def test_holm_keeps_a_clear_drop_among_clean_sets() -> None:
    rng = random.Random(10)
    clean = [_run([0.9] * 25, [0.9] * 25, rng) for _ in range(3)]
    rule = _rule(_sets([*clean, _run([1.0] * 25, [0.3] * 25, rng)]))
    assert rule is not None and rule["status"] == "WARN" and rule["measured"] == 1
    assert "Holm over 4 sets" in rule["threshold"]


def test_a_real_drop_is_caught_with_the_items_named() -> None:
    rng = random.Random(8)
    caught = sum(_rule(_run([0.95] * 50, [0.75] * 50, rng))["status"] == "WARN"  # type: ignore[index]
                 for _ in range(200))
    assert caught / 200 >= 0.8
    rule = _rule(_run([1.0] * 30, [0.0] * 30, rng))
    assert rule is not None and rule["status"] == "WARN"
    assert "right alone, wrong under load: i0, i1, " in rule["message"] and "and 25 more" in rule["message"]
    failing = _rule(_run([1.0] * 30, [0.0] * 30, rng), {**DECLARED, "on_drop": "fail"})
    assert failing is not None and failing["status"] == "FAIL"


def test_a_significant_drop_under_max_drop_passes() -> None:
    """1,000 items, 30 flipped the bad way and none back: significant, but 0.03 is within a declared 0.05."""
    rows = [_row(f"i{i}", "alone", "7") for i in range(1000)]
    rows += [_row(f"i{i}", "under_load", "0" if i < 30 else "7") for i in range(1000)]
    figures = accuracy_figures(_table(rows))
    assert _rule(figures, {**DECLARED, "max_drop": 0.05})["status"] == "PASS"  # type: ignore[index]
    assert _rule(figures)["status"] == "WARN"  # type: ignore[index]


def test_nothing_paired_is_skipped_and_undeclared_is_not_listed() -> None:
    only_alone = accuracy_figures(_table([_row("a", "alone", "7")]))
    assert _rule(only_alone)["status"] == "SKIP"  # type: ignore[index]
    assert _rule(None, None) is None
    assert RULE_DOCS["accuracy_drop"].since == 10 and _accuracy_drop in RULES
