"""`passport gate RUN --baseline BASE`: is this build worse than its baseline, beyond noise?

Two conditions read a baseline (the rest of a gate's conditions are `_gate.py`'s, on the run alone):

- `<metric id>.<stat> regression < <tolerance>` (or `<=`), e.g. `ttft.any.p99 regression < 5%`:
  the relative change in the worse direction, `(current - baseline) / baseline` for a latency
  (up is worse), `(baseline - current) / baseline` for a rate (throughput and goodput: down is
  worse). Latencies: ttft.any, ttft.content, itl.chunk, tpot and e2e at p50, p90, p95 or p99;
  rates: throughput.output_tokens_per_s, throughput.requests_per_s, goodput.requests_per_s at
  mean.
- `canaries no_new_failures`: no canary case (by id and content hash) that passed in the baseline
  fails now; each one that does is named.

Each regression is tested with compare's statistics (`_compare.py`, `_stats.py`: each run's error
from time blocks, Welch's t, two-sided), Holm-corrected across every regression condition of the
gate (and, for campaigns, every arm). Verdicts:

- PASS: the change is within the tolerance (an improvement always is);
- FAIL: the change is beyond the tolerance AND the difference is significant after the correction;
- INCONCLUSIVE: beyond the tolerance, but the data cannot separate it from noise (or the
  statistic cannot be tested: too few samples, the run has no timed phase). `--inconclusive
  fail|pass` decides what it does to the exit code; fail by default, and stated.

Before any of it, the comparability invariants of compare (model, precision, decoding, workload,
load, window, cache): one broken, and not allowed (`--allow`), is a `NotComparable` (a usage
error, exit 2) naming it; the baseline must be VALID. A current run that is not VALID is gated,
not refused: its regressions are INCONCLUSIVE (its figures are not a measurement of the
protocol), its canaries are still compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from passport._errors import PassportError
from passport.audit import OpenRun, parse_fraction
from passport.judge._compare import (
    INVARIANTS,
    LATENCIES,
    StatPair,
    invariant_broken,
    invariant_text,
    invariant_values,
    quantile_pair,
    rate_pair,
    run_samples,
)
from passport.judge._names import GateError
from passport.judge._stats import Test, difference, holm
from passport.model import Passport, passport_of

if TYPE_CHECKING:
    from passport.judge._campaign import TrustedCampaign

__all__ = ["BaselineCondition", "BaselineResult", "NotComparable", "Regression", "NoNewFailures",
           "parse_baseline_condition", "evaluate_against", "finish", "counts_as_failing", "RATES", "QUANTILES", "Pair",
           "campaign_pairs"]

Status = Literal["PASS", "FAIL", "INCONCLUSIVE"]
QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
RATES = ("throughput.output_tokens_per_s", "throughput.requests_per_s", "goodput.requests_per_s")
_REGRESSION = re.compile(r"^\s*([A-Za-z0-9_.]+)\s+regression\s*(<=|<)\s*(\S+)\s*$")
_NO_NEW_FAILURES = re.compile(r"^\s*canaries\s+no_new_failures\s*$")
_COMPARED = tuple(name for name in INVARIANTS if name != "validity")  # validity: the baseline's, below


class NotComparable(PassportError):
    """The run and its baseline differ in a comparability invariant: nothing to gate on."""


@dataclass(frozen=True)
class Regression:
    """`<metric>.<stat> regression < tolerance`."""

    text: str
    metric: str
    stat: str
    tolerance: float
    inclusive: bool  # `<=`

    @property
    def rate(self) -> bool:
        return self.metric in RATES


@dataclass(frozen=True)
class NoNewFailures:
    """`canaries no_new_failures`."""

    text: str


BaselineCondition = Regression | NoNewFailures


@dataclass
class BaselineResult:
    """One condition's outcome on one pair (run, baseline); `scope`: the campaign arm, or ""."""

    text: str
    scope: str
    status: Status
    message: str
    baseline: float | None = None
    current: float | None = None
    change: float | None = None  # relative, in the worse direction (positive: worse)
    interval: tuple[float, float] | None = None  # of `change`, at `level`
    level: float | None = None
    p: float | None = None  # Holm-adjusted
    unit: str = ""  # "s" for a latency, "/s" for a rate, "cases" for no_new_failures (baseline: cases that
    # passed there; current: those of them that fail now)
    condition: Regression | None = field(default=None, repr=False)
    test: Test | None = field(default=None, repr=False)
    pair: StatPair | None = field(default=None, repr=False)


def parse_baseline_condition(text: str) -> BaselineCondition | None:
    """The baseline condition `text` states, or None when it is not one (an absolute condition);
    GateError for a regression condition that names an unknown metric or statistic."""
    if _NO_NEW_FAILURES.match(text):
        return NoNewFailures(text.strip())
    match = _REGRESSION.match(text)
    if not match:
        if re.search(r"\bregression\b|no_new_failure", text):
            raise GateError(f"cannot read gate condition {text!r}: write '<metric id>.<stat> regression < 5%' or "
                            "'canaries no_new_failures'")
        return None
    name, op, raw = match.groups()
    metric, _, stat = name.rpartition(".")
    latency_ok = metric in LATENCIES and stat in QUANTILES
    rate_ok = metric in RATES and stat == "mean"
    if not (latency_ok or rate_ok):
        raise GateError(f"gate condition {text!r}: {name!r} cannot be gated against a baseline; use "
                        f"<latency>.<stat> with a latency of {', '.join(LATENCIES)} and a stat of "
                        f"{', '.join(QUANTILES)}, or <rate>.mean with a rate of {', '.join(RATES)}")
    try:
        tolerance = parse_fraction(raw)
    except ValueError as exc:
        raise GateError(f"gate condition {text!r}: {raw!r} is not a tolerance; write 5% or 0.05") from exc
    if not 0 <= tolerance < 10:
        raise GateError(f"gate condition {text!r}: a tolerance of {raw} is not a relative change (0% to 1000%)")
    return Regression(text.strip(), metric, stat, tolerance, op == "<=")


@dataclass(frozen=True)
class Pair:
    """A run and the baseline it is gated against (a campaign: one per arm, `scope` its name)."""

    run: OpenRun
    baseline: OpenRun
    scope: str = ""


def check_comparable(pair: Pair, current: Passport, base: Passport, allowed: tuple[str, ...]) -> None:
    """NotComparable naming the first invariant broken (and not allowed), or the baseline's
    verdict when it is not VALID."""
    where = f" ({pair.scope})" if pair.scope else ""
    if base.verdict != "VALID":
        raise NotComparable(f"the baseline {pair.baseline.folder}{where} is {base.verdict}, not VALID: its figures are "
                            "not a measurement of its protocol; gate against a VALID run")
    mine, theirs = invariant_values(current), invariant_values(base)
    for name in _COMPARED:
        if name not in allowed and invariant_broken(name, [theirs[name], mine[name]]):
            raise NotComparable(
                f"not comparable{where}: {name} differs (baseline {invariant_text(name, theirs[name])}; this run "
                f"{invariant_text(name, mine[name])}); a baseline must run the same protocol (--allow {name} "
                "gates anyway, and says so)")


def _canary_cases(run: OpenRun) -> dict[tuple[str, str], bool]:
    """Each canary case of a run, (id, content hash) -> passed in every row of it."""
    table = run.derived.run.canaries
    if table is None or not table.num_rows:
        return {}
    cases: dict[tuple[str, str], bool] = {}
    for row in table.select(["case_id", "case_sha256", "verdict"]).to_pylist():
        key = (str(row["case_id"]), str(row["case_sha256"]))
        cases[key] = cases.get(key, True) and row["verdict"] == "pass"
    return cases


def _no_new_failures(condition: NoNewFailures, pair: Pair) -> BaselineResult:
    before, now = _canary_cases(pair.baseline), _canary_cases(pair.run)
    if not now:
        return BaselineResult(condition.text, pair.scope, "INCONCLUSIVE",
                              "this run ran no canaries: nothing shows the baseline's passing cases still pass")
    newly = sorted(case for case, passed in now.items() if not passed and before.get(case) is True)
    passed_before = float(sum(before.values()))
    if newly:
        named = ", ".join(case_id for case_id, _ in newly[:10]) + (f" and {len(newly) - 10} more"
                                                                   if len(newly) > 10 else "")
        return BaselineResult(condition.text, pair.scope, "FAIL",
                              f"{len(newly)} case(s) passed in the baseline and fail now: {named}", passed_before,
                              float(len(newly)), unit="cases")
    failing = sum(not passed for passed in now.values())
    unseen = sum(case not in before for case in now)
    extra = (f"; {failing} failing case(s) also failed in the baseline or are new" if failing else "") + \
        (f"; {unseen} case(s) not in the baseline (a changed suite or case)" if unseen else "")
    return BaselineResult(condition.text, pair.scope, "PASS",
                          f"no case that passed in the baseline fails now ({len(now)} cases){extra}", passed_before,
                          0.0, unit="cases")


def _change(condition: Regression, base: float, value: float) -> float:
    """Relative change in the worse direction."""
    return (base - value) / base if condition.rate else (value - base) / base


def _regression(condition: Regression, pair: StatPair, scope: str, current_verdict: str) -> BaselineResult:
    unit = "/s" if condition.rate else "s"
    if current_verdict != "VALID":
        return BaselineResult(condition.text, scope, "INCONCLUSIVE", f"this run is {current_verdict}: its figures "
                              "are not a measurement of the protocol", pair.base, pair.other, unit=unit)
    if pair.base is None or pair.other is None or pair.base == 0:
        return BaselineResult(condition.text, scope, "INCONCLUSIVE", "no value to compare (" + (
            "the baseline's is zero" if pair.base == 0 else "a run has no successful measured request") + ")",
            pair.base, pair.other, unit=unit)
    change = _change(condition, pair.base, pair.other)
    result = BaselineResult(condition.text, scope, "PASS", "", pair.base, pair.other, change, unit=unit,
                            condition=condition, pair=pair)
    if pair.estimates is not None:
        result.test = Test(difference(*pair.estimates).p)
    elif _within(condition, change):
        result.message = f"within the tolerance (untested: {pair.untestable})"
    else:
        result.status = "INCONCLUSIVE"
        result.message = f"beyond the tolerance but untested: {pair.untestable}"
    return result


def counts_as_failing(status: Status, inconclusive: str) -> bool:
    """Whether a baseline condition's verdict fails the gate under `--inconclusive fail|pass`."""
    return status == "FAIL" or (status == "INCONCLUSIVE" and inconclusive == "fail")


def _within(condition: Regression, change: float) -> bool:
    return change <= condition.tolerance if condition.inclusive else change < condition.tolerance


def evaluate_against(pair: Pair, conditions: list[BaselineCondition],
                     allowed: tuple[str, ...] = ()) -> list[BaselineResult]:
    """Each baseline condition on one pair, the regressions not yet corrected (`finish` does
    that across every pair of the gate); NotComparable when the pair is not comparable."""
    current, base = passport_of(pair.run), passport_of(pair.baseline)
    check_comparable(pair, current, base, allowed)
    regressions = [c for c in conditions if isinstance(c, Regression)]
    samples = None
    if regressions and current.verdict == "VALID":
        samples = run_samples(pair.baseline.derived.run, base), run_samples(pair.run.derived.run, current)
    out = []
    for condition in conditions:
        if isinstance(condition, NoNewFailures):
            out.append(_no_new_failures(condition, pair))
            continue
        stat_pair = StatPair(None, None, None, "this run has no timed phase")
        if samples is not None:
            b, o = samples
            stat_pair = (rate_pair(condition.metric, base, current, b, o) if condition.rate
                         else quantile_pair(condition.metric, QUANTILES[condition.stat], b, o))
        out.append(_regression(condition, _stat_values(stat_pair, condition, base, current), pair.scope,
                               current.verdict))
    return out


def _stat_values(pair: StatPair, condition: Regression, base: Passport, current: Passport) -> StatPair:
    """`pair`, with each run's value from its passport where the samples gave none (a run with
    no timed phase has no samples; its passport still says what it measured, if anything)."""
    if pair.base is not None and pair.other is not None:
        return pair
    def value(p: Passport) -> float | None:
        figure = p.results["metrics"].get(condition.metric)
        stat = None if figure is None else figure.get(condition.stat)
        return float(stat) if isinstance(stat, (int, float)) else None

    return StatPair(pair.base if pair.base is not None else value(base),
                    pair.other if pair.other is not None else value(current), None, pair.untestable)


def finish(results: list[BaselineResult], alpha: float = 0.05) -> list[BaselineResult]:
    """Holm's correction across every tested regression of the gate, then each verdict (see the
    module docstring); returns `results`, completed."""
    tested = [r for r in results if r.test is not None]
    holm([r.test for r in tested if r.test is not None], alpha)
    for r in tested:
        test, pair, condition = r.test, r.pair, r.condition
        assert test is not None and pair is not None and pair.estimates is not None and test.level is not None
        assert r.change is not None and r.baseline is not None and condition is not None
        r.p, r.level = test.p_adjusted, test.level
        low, high = difference(*pair.estimates).interval(test.level)  # of current - baseline
        scale = abs(r.baseline)
        r.interval = (-high / scale, -low / scale) if condition.rate else (low / scale, high / scale)
        if _within(condition, r.change):
            r.message = "within the tolerance"
        elif test.significant:
            r.status, r.message = "FAIL", "beyond the tolerance, and significant"
        else:
            r.status, r.message = "INCONCLUSIVE", "beyond the tolerance, but not separable from noise"
    return results


def _last_run(campaign: TrustedCampaign, arm: dict[str, Any]) -> OpenRun | None:
    """An arm's latest VALID repetition's run (else its latest with a passport; None: none)."""
    reps = [r for r in arm["repetitions"] if r["run"] is not None]
    valid = [r for r in reps if r.get("verdict") == "VALID"]
    chosen = (valid or reps)[-1:]
    return campaign.runs[chosen[0]["run"]] if chosen else None


def campaign_pairs(current: TrustedCampaign, baseline: TrustedCampaign,
                   conditions: list[BaselineCondition]) -> tuple[list[Pair], list[BaselineResult]]:
    """Each arm of a campaign against the baseline campaign's arm of the same name (each side's
    latest VALID repetition), and an INCONCLUSIVE result per condition for an arm with no
    counterpart or no passport."""
    theirs = {arm["name"]: arm for arm in baseline.record["arms"]}
    pairs, missing = [], []
    for arm in current.record["arms"]:
        name = str(arm["name"])
        run = _last_run(current, arm)
        base = _last_run(baseline, theirs[name]) if name in theirs else None
        if run is not None and base is not None:
            pairs.append(Pair(run, base, name))
            continue
        why = (f"the baseline campaign has no arm named {name!r}" if name not in theirs
               else "the baseline's arm has no passport" if base is None else "this arm has no passport")
        missing += [BaselineResult(c.text, name, "INCONCLUSIVE", why) for c in conditions]
    return pairs, missing
