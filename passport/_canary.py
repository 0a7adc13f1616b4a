"""The canary phase of a run (and of `passport canary`): run the declared suite before any
timing, keep every case in canaries.parquet, and sum it up for the passport.

Failures are counted apart by category for the validity section: admission rejections,
length truncations, schema failures, tool failures and completed-but-wrong answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from canaries import CanaryError, CaseResult, Suite, load_suite, run_suite, write_results
from harness import Api, Endpoint, HttpClient, Timeouts
from passport._errors import SpecError
from passport._model import CanaryFailure, CanaryInfo

__all__ = ["CANARIES_FILE", "load_declared_suite", "run_canaries", "canary_info", "canary_counts"]

CANARIES_FILE = "canaries.parquet"
_CATEGORIES = {"rejection": "canary_rejections", "truncation": "canary_truncations",
               "schema_failure": "schema_failures", "tool_failure": "tool_failures", "wrong_answer": "wrong_answers",
               "error": "canary_errors"}


def load_declared_suite(name: str) -> Suite:
    """The spec's `canaries` suite (a bundled name or a path); a SpecError if it cannot be used."""
    try:
        return load_suite(name)
    except CanaryError as exc:
        raise SpecError(f"canaries: {exc}") from None


def run_canaries(suite: Suite, base_url: str, headers: dict[str, str], ca_file: str | None, timeouts: Timeouts,
                 model: str, api: Api, t0_ns: int, on_case: Callable[[CaseResult], None] | None = None,
                 ) -> list[CaseResult]:
    """Run the suite against the endpoint, one case at a time, on a connection of its own."""
    client = HttpClient(Endpoint.parse(base_url), timeouts, max_idle=1, extra_headers=headers, ca_file=ca_file)

    async def go() -> list[CaseResult]:
        await client.start()
        try:
            return await run_suite(client, suite, model, api, t0_ns, on_case=on_case)
        finally:
            await client.aclose()

    return asyncio.run(go())


def canary_info(suite: Suite, results: list[CaseResult], forced: bool, folder: Path | None) -> CanaryInfo:
    """The passport's canary section; writes canaries.parquet into `folder` when given."""
    if folder is not None:
        write_results(folder / CANARIES_FILE, results)
    failed = [r for r in results if not r.passed]
    return CanaryInfo(
        status="failed" if failed else "passed", suite=suite.suite, suite_sha256=suite.sha256,
        suite_version=suite.version, n_cases=len(results), n_failed=len(failed), forced=forced and bool(failed),
        reason=(f"{len(failed)} of {len(results)} cases failed" if failed else f"all {len(results)} cases passed"),
        failures=[CanaryFailure(case_id=r.case_id, kind=r.kind, category=r.category or "error", reason=r.reason,
                                expected=r.expected, actual=r.actual) for r in failed],
    )


def canary_counts(results: list[CaseResult]) -> dict[str, int]:
    """Failed cases by category, under the names the validity counts use."""
    counts = dict.fromkeys(_CATEGORIES.values(), 0)
    for r in results:
        if not r.passed:
            counts[_CATEGORIES.get(r.category or "error", "canary_errors")] += 1
    return counts
