"""Record mode: a suite's exact-output references written from a trusted endpoint.

`record_suite(suite, results)` returns the suite with each exact case's `expect.text` set to
what the trusted launch answered (other kinds are kept as written); saved as YAML, it is the
reference a later launch of the same model must reproduce exactly.
"""

from __future__ import annotations

from canaries._run import CaseResult
from canaries._suite import CaseSpec, Suite
from harness import SUCCESS_OUTCOMES

__all__ = ["record_suite"]


def record_suite(suite: Suite, results: list[CaseResult]) -> Suite:
    """The suite with exact cases' references taken from `results` (one per case, same order)."""
    by_id = {r.case_id: r for r in results}
    cases: list[CaseSpec] = []
    for case in suite.cases:
        result = by_id.get(case.id)
        if (case.kind == "exact" and "answer" not in case.expect and result is not None
                and result.outcome in SUCCESS_OUTCOMES):
            case = case.model_copy(update={"expect": {**case.expect, "text": result.content}})
        cases.append(case)
    return suite.model_copy(update={"cases": cases})
