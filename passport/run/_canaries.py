"""The canary phase of a run (and of `passport canary`): run the declared suite before any
timing, keep every case in canaries.parquet, and sum it up for the passport.

Failures are counted apart by category for the validity section: admission rejections,
length truncations, schema failures, tool failures and completed-but-wrong answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from canaries import CanaryError, CaseResult, Suite, load_suite, run_case, run_suite, write_results
from harness import Api, Endpoint, HttpClient, ProgressSink, Timeouts
from passport._errors import SpecError
from passport.model import CanaryFailure, CanaryInfo, CanaryUnderLoad

__all__ = ["CANARIES_FILE", "load_declared_suite", "run_canaries", "canary_info", "canary_counts", "UnderLoad"]

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
                 engine: str | None = None) -> list[CaseResult]:
    """Run the suite against the endpoint, one case at a time, on a connection of its own."""
    client = HttpClient(Endpoint.parse(base_url), timeouts, max_idle=1, extra_headers=headers, ca_file=ca_file)

    async def go() -> list[CaseResult]:
        await client.start()
        try:
            return await run_suite(client, suite, model, api, t0_ns, on_case=on_case, engine=engine)
        finally:
            await client.aclose()

    return asyncio.run(go())


def _failures(results: list[CaseResult]) -> list[CanaryFailure]:
    return [CanaryFailure(case_id=r.case_id, kind=r.kind, category=r.category or "error", reason=r.reason,
                          expected=r.expected, actual=r.actual) for r in results if not r.passed]


def canary_info(suite: Suite, results: list[CaseResult], forced: bool, folder: Path | None,
                under_load: list[CaseResult] | None = None, share: float = 0.0) -> CanaryInfo:
    """The passport's canary section (gate `results`, and `under_load` cases sampled during the
    timed run); writes every case to canaries.parquet in `folder` when given."""
    if folder is not None:
        write_results(folder / CANARIES_FILE, results + (under_load or []))
    failed = _failures(results)
    served = [r.prompt_tokens for r in results if r.kind == "long_context" and r.outcome == "ok" and r.prompt_tokens]
    loaded = None
    if under_load is not None:
        loaded = CanaryUnderLoad(share=share, n_cases=len(under_load), n_failed=sum(not r.passed for r in under_load),
                                 failures=_failures(under_load))
    return CanaryInfo(
        largest_context_served_tokens=max(served) if served else None,
        status="failed" if failed else "passed", suite=suite.suite, suite_sha256=suite.sha256,
        suite_version=suite.version, n_cases=len(results), n_failed=len(failed), forced=forced and bool(failed),
        reason=(f"{len(failed)} of {len(results)} cases failed" if failed else f"all {len(results)} cases passed"),
        failures=failed, under_load=loaded,
    )


def canary_counts(results: list[CaseResult]) -> dict[str, int]:
    """Failed cases by category, under the names the validity counts use."""
    counts = dict.fromkeys(_CATEGORIES.values(), 0)
    for r in results:
        if not r.passed:
            counts[_CATEGORIES.get(r.category or "error", "canary_errors")] += 1
    return counts


class UnderLoad:
    """Canaries sampled during the timed run: after every 1/share completed timed requests, the
    next case of the suite (cyclically) is sent on a connection of its own, so an engine whose
    answers degrade under load is caught. Verdicts are kept apart from the pre-timing gate
    (phase "under_load" in canaries.parquet). `sink` wraps the run's progress sink to count
    completions; `run` goes until `stop` is set."""

    def __init__(self, suite: Suite, client: HttpClient, model: str, api: Api, t0_ns: int, share: float,
                 inner: ProgressSink | None, engine: str | None = None) -> None:
        self.suite, self.client, self.model, self.api, self.t0_ns = suite, client, model, api, t0_ns
        self.engine = engine
        self.every = max(1, round(1.0 / share))
        self.inner = inner
        self.done = 0
        self.results: list[CaseResult] = []

    def update(self, done: int, in_flight: int, errors: int) -> None:
        self.done = done
        if self.inner is not None:
            self.inner.update(done, in_flight, errors)

    async def run(self, stop: asyncio.Event) -> None:
        await self.client.start()
        try:
            next_at, i = self.every, 0
            while not stop.is_set():
                if self.done < next_at:
                    await asyncio.sleep(0.02)
                    continue
                case = self.suite.cases[i % len(self.suite.cases)]
                self.results.append(await run_case(self.client, self.suite, case, self.model, self.api, self.t0_ns,
                                                   "under_load", self.engine))
                i += 1
                next_at += self.every
        finally:
            await self.client.aclose()
