"""JUnit XML for CI systems: one test case per gate condition or canary case."""

from __future__ import annotations

from xml.etree import ElementTree

from passport.judge import ConditionResult
from passport.judge._baseline import BaselineResult
from passport.report._baseline_text import baseline_line

__all__ = ["junit_cases", "junit_xml", "junit_gate"]


def junit_cases(suite_name: str, cases: list[tuple[str, str, bool, str]]) -> str:
    """JUnit XML for (classname, name, passed, failure message) cases."""
    failures = sum(not passed for _, _, passed, _ in cases)
    suite = ElementTree.Element("testsuite", name=suite_name, tests=str(len(cases)), failures=str(failures),
                                errors="0")
    for classname, name, passed, message in cases:
        case = ElementTree.SubElement(suite, "testcase", classname=classname, name=name)
        if not passed:
            ElementTree.SubElement(case, "failure", message=message, type="Failure").text = f"{name}: {message}"
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def junit_xml(run_name: str, results: list[ConditionResult]) -> str:
    """JUnit XML: one test case per gate condition, a <failure> for each that failed."""
    return junit_cases("passport gate", [(f"passport.gate.{run_name}", r.condition.text, r.passed, r.message)
                                         for r in results])


def junit_gate(run_name: str, results: list[ConditionResult], against: list[BaselineResult],
               inconclusive: str) -> str:
    """JUnit XML of a gate with a baseline: one test case per condition (and per arm). A baseline
    condition's case carries as properties its verdict, baseline and current values (in `unit`:
    s, /s or cases), relative change, the change's interval and level, and Holm-adjusted p. FAIL
    is a <failure>; INCONCLUSIVE a <failure> under `--inconclusive fail`, a <skipped> under
    `pass` (the policy is a property of the suite)."""
    counted = sum(not r.passed for r in results) + sum(
        r.status == "FAIL" or (r.status == "INCONCLUSIVE" and inconclusive == "fail") for r in against)
    suite = ElementTree.Element("testsuite", name="passport gate", tests=str(len(results) + len(against)),
                                failures=str(counted), errors="0")
    props = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(props, "property", name="inconclusive", value=inconclusive)
    classname = f"passport.gate.{run_name}"
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname=classname, name=r.condition.text)
        if not r.passed:
            ElementTree.SubElement(case, "failure", message=r.message, type="Failure").text = \
                f"{r.condition.text}: {r.message}"
    for b in against:
        name = b.text + (f" [{b.scope}]" if b.scope else "")
        case = ElementTree.SubElement(suite, "testcase", classname=classname, name=name)
        props = ElementTree.SubElement(case, "properties")
        interval = "" if b.interval is None else f"[{b.interval[0]:.6g}, {b.interval[1]:.6g}]"
        for key, value in (("verdict", b.status), ("baseline", "" if b.baseline is None else f"{b.baseline:.6g}"),
                           ("current", "" if b.current is None else f"{b.current:.6g}"), ("unit", b.unit),
                           ("change", "" if b.change is None else f"{b.change:.6g}"), ("interval", interval),
                           ("interval_level", "" if b.level is None else f"{b.level:.6g}"),
                           ("holm_p", "" if b.p is None else f"{b.p:.6g}")):
            ElementTree.SubElement(props, "property", name=key, value=value)
        message = f"{b.status}: {baseline_line(b)}"
        if b.status == "FAIL" or (b.status == "INCONCLUSIVE" and inconclusive == "fail"):
            ElementTree.SubElement(case, "failure", message=message, type=b.status).text = f"{name}: {message}"
        elif b.status == "INCONCLUSIVE":
            ElementTree.SubElement(case, "skipped", message=message)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
