"""JUnit XML for CI systems: one test case per gate condition or canary case."""

from __future__ import annotations

from xml.etree import ElementTree

from passport.judge import ConditionResult
from passport.judge._baseline import BaselineResult, counts_as_failing
from passport.report._baseline_text import baseline_line

__all__ = ["junit_cases", "junit_gate"]


def _case(suite: ElementTree.Element, classname: str, name: str, failure: str | None,
          failure_type: str = "Failure") -> ElementTree.Element:
    """One <testcase> of `suite`, with a <failure> carrying `failure` when it is not None."""
    case = ElementTree.SubElement(suite, "testcase", classname=classname, name=name)
    if failure is not None:
        ElementTree.SubElement(case, "failure", message=failure, type=failure_type).text = f"{name}: {failure}"
    return case


def _xml(suite: ElementTree.Element) -> str:
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def junit_cases(suite_name: str, cases: list[tuple[str, str, bool, str]]) -> str:
    """JUnit XML for (classname, name, passed, failure message) cases."""
    failures = sum(not passed for _, _, passed, _ in cases)
    suite = ElementTree.Element("testsuite", name=suite_name, tests=str(len(cases)), failures=str(failures),
                                errors="0")
    for classname, name, passed, message in cases:
        _case(suite, classname, name, None if passed else message)
    return _xml(suite)


def junit_gate(run_name: str, results: list[ConditionResult], against: list[BaselineResult],
               inconclusive: str) -> str:
    """JUnit XML of a gate: one test case per condition (and per arm), a <failure> for each that
    failed. A baseline condition's case carries as properties its verdict, baseline and current
    values (in `unit`: s, /s or cases), relative change, the change's interval and level, and
    Holm-adjusted p. FAIL is a <failure>; INCONCLUSIVE a <failure> under `--inconclusive fail`, a
    <skipped> under `pass` (the policy is a property of the suite)."""
    counted = sum(not r.passed for r in results) + sum(counts_as_failing(r.status, inconclusive) for r in against)
    suite = ElementTree.Element("testsuite", name="passport gate", tests=str(len(results) + len(against)),
                                failures=str(counted), errors="0")
    props = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(props, "property", name="inconclusive", value=inconclusive)
    classname = f"passport.gate.{run_name}"
    for r in results:
        _case(suite, classname, r.condition.text, None if r.passed else r.message)
    for b in against:
        name = b.text + (f" [{b.scope}]" if b.scope else "")
        message = f"{b.status}: {baseline_line(b)}"
        failing = counts_as_failing(b.status, inconclusive)
        case = _case(suite, classname, name, message if failing else None, b.status)
        props = ElementTree.Element("properties")
        case.insert(0, props)
        interval = "" if b.interval is None else f"[{b.interval[0]:.6g}, {b.interval[1]:.6g}]"
        for key, value in (("verdict", b.status), ("baseline", "" if b.baseline is None else f"{b.baseline:.6g}"),
                           ("current", "" if b.current is None else f"{b.current:.6g}"), ("unit", b.unit),
                           ("change", "" if b.change is None else f"{b.change:.6g}"), ("interval", interval),
                           ("interval_level", "" if b.level is None else f"{b.level:.6g}"),
                           ("holm_p", "" if b.p is None else f"{b.p:.6g}")):
            ElementTree.SubElement(props, "property", name=key, value=value)
        if b.status == "INCONCLUSIVE" and not failing:
            ElementTree.SubElement(case, "skipped", message=message)
    return _xml(suite)
