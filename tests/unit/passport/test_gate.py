from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

import pytest

from passport import Passport
from passport.judge import GateError, evaluate_gate, load_gate_file, parse_condition, resolve_campaign_name
from passport.judge._baseline import parse_baseline_condition
from passport.report import junit_gate
from tests.conftest import REPO
from tests.unit.passport.conftest import stat_of


@pytest.fixture
def passport(sample_passport: Passport) -> Passport:
    results = {**sample_passport.results,
               "metrics": {"ttft.any": stat_of(100, p50=0.1, p99=1.5),
                           "throughput.output_tokens_per_s": stat_of(1, mean=42.0)},
               "metrics_failure_inclusive": {"ttft.any": stat_of(101, n_failed=1, p50=0.1, p99=None)},
               "outcomes": {"ok": 99, "timeout": 1}}
    validity = sample_passport.validity.model_copy(update={"counts": {"measured": 200, "succeeded": 199}})
    return sample_passport.model_copy(update={"results": results, "validity": validity})


def _check(passport: Passport, *texts: str) -> list[tuple[bool, str]]:
    return [(r.passed, r.message) for r in evaluate_gate(passport, [parse_condition(t) for t in texts])]


def test_latency_conditions_take_durations(passport: Passport) -> None:
    assert _check(passport, "ttft.any.p99 < 2s", "ttft.any.p50 <= 100ms", "ttft.any.p50 < 50ms") == [
        (True, "measured 1.500 s"), (True, "measured 100.000 ms"), (False, "measured 100.000 ms")]


def test_error_rate_takes_percentages_and_fractions(passport: Passport) -> None:
    assert _check(passport, "error_rate < 0.6%", "error_rate < 0.004") == [
        (True, "measured 0.500 %"), (False, "measured 0.500 %")]


def test_a_missing_figure_fails_never_passes(passport: Passport) -> None:
    assert _check(passport, "failure_inclusive.ttft.any.p99 < 100s", "itl.chunk.p99 < 1s") == [
        (False, "the passport has no value for it"), (False, "the passport has no value for it")]


def test_canaries_not_run_do_not_pass_a_canary_gate(passport: Passport) -> None:
    assert _check(passport, "canaries == pass", "canaries == not_run", "verdict == valid") == [
        (False, "measured not_run"), (True, "measured not_run"), (True, "measured VALID")]


def test_outcomes_rates_and_counts(passport: Passport) -> None:
    assert _check(passport, "outcomes.timeout == 0", "outcomes.rejected == 0",
                  "throughput.output_tokens_per_s.mean >= 40", "counts.measured >= 100") == [
        (False, "measured 1"), (True, "measured 0"), (True, "measured 42"), (True, "measured 200")]


@pytest.mark.parametrize("text,error", [
    ("ttft.anything.p99 < 2s", "unknown gate name 'ttft.anything.p99'"),
    ("ttft.any.p98 < 2s", "unknown gate name 'ttft.any.p98'"),
    ("ttft.any.p99 < fast", "'fast' is not a valid value for ttft.any.p99 (latency)"),
    ("verdict < VALID", "verdict can only be compared with == or !="),
    ("canaries == maybe", "'maybe' is not a valid value for canaries"),
    ("ttft.any.p99 2s", "write <name> <op> <value>"),
    # A bare number on a latency passed as seconds: 3.2 s measured passed `< 2000` (meant as ms).
    ("ttft.any.p99 < 2000", "ttft.any.p99 is a latency, and 2000 has no unit; write 2000ms or 2000s"),
    ("failure_inclusive.e2e.p50 <= 1.5", "is a latency, and 1.5 has no unit"),
    ("results.client.dispatch_lag_p99_ms < 1e1", None),
])
def test_conditions_that_cannot_be_understood_are_usage_errors(text: str, error: str | None) -> None:
    if error is None:  # a figure whose name carries its unit takes a bare number
        assert parse_condition(text).value == 10.0
        return
    with pytest.raises(GateError, match=error.replace("(", r"\(").replace(")", r"\)")):
        parse_condition(text)


def test_junit_has_a_case_per_condition_and_a_failure_per_failed_one(passport: Passport) -> None:
    results = evaluate_gate(passport, [parse_condition("ttft.any.p99 < 2s"), parse_condition("error_rate < 0.1%")])
    suite = ElementTree.fromstring(junit_gate("run", results, [], "fail").split("?>", 1)[1])
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["ttft.any.p99 < 2s", "error_rate < 0.1%"]
    assert cases[0].find("failure") is None and cases[1].find("failure") is not None


def test_gate_file(tmp_path: Path) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text("require:\n  - ttft.any.p99 < 2s\n  - canaries == pass\n")
    assert load_gate_file(path) == ["ttft.any.p99 < 2s", "canaries == pass"]
    path.write_text("require: ttft.any.p99 < 2s\n")
    with pytest.raises(GateError, match="must hold `require:` with a list"):
        load_gate_file(path)


@pytest.mark.parametrize("text,closest", [
    ("outcomes.timout == 0", "'outcomes.timeout'"),
    ("outcomes.nosuchclass == 0", None),
    ("counts.schema_failure == 0", "'counts.schema_failures'"),
    ("validity.counts.tool_failure == 0", "'validity.counts.tool_failures'"),
    ("ttft.any.p999 < 2s", "'ttft.any.p99'"),
    ("results.slo.atainment > 0.9", "'results.slo.attainment'"),
])
def test_a_mistyped_name_is_a_usage_error_naming_the_closest_valid_ones(text: str, closest: str | None) -> None:
    """Regression (issue 12): `outcomes.timout == 0` used to pass, reading an absent class as 0."""
    with pytest.raises(GateError, match="unknown gate name") as raised:
        parse_condition(text)
    if closest is not None:
        assert "did you mean " in str(raised.value) and closest in str(raised.value).split("?")[0]


def test_full_paths_into_the_passport_read_the_same_figures(passport: Passport) -> None:
    assert _check(passport, "results.metrics.ttft.any.p99 < 2s", "validity.counts.measured == 200",
                  "results.outcomes.timeout == 1", "validity.verdict == VALID", "results.client.cpu_share_max < 2",
                  "validity.canaries.status == not_run") == [
        (True, "measured 1.500 s"), (True, "measured 200"), (True, "measured 1"), (True, "measured VALID"),
        (False, "the passport has no value for it"), (True, "measured not_run")]


def test_every_gate_example_in_the_readme_is_understood(passport: Passport) -> None:
    readme = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
    examples = re.findall(r"--require '([^']+)'", readme)
    assert len(examples) >= 5
    for text in examples:
        if text.startswith("arms."):  # a campaign's names (passport gate CAMPAIGN_DIR)
            assert resolve_campaign_name(text.split()[0]).path[0] == "arms"
            continue
        if text.startswith("<metric>.<stat>"):  # the grammar itself, written out
            continue
        if parse_baseline_condition(text) is not None:  # read against a baseline (test_baseline.py)
            continue
        condition = parse_condition(text)
        assert evaluate_gate(passport, [condition])[0].condition.target.path
