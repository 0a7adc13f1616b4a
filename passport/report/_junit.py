"""JUnit XML for CI systems: one test case per gate condition or canary case."""

from __future__ import annotations

from xml.etree import ElementTree

from passport.judge import ConditionResult

__all__ = ["junit_cases", "junit_xml"]


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
