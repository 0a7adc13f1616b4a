"""The canary phase of a run (and of `passport canary`): run the declared suite before any
timing, keep every case in canaries.parquet, and sum it up for the passport.

Failures are counted apart by category for the validity section: admission rejections,
length truncations, schema failures, tool failures and completed-but-wrong answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from canaries import (
    CASE_APIS,
    CanaryError,
    CaseResult,
    Suite,
    load_suite,
    require_sandbox,
    run_case,
    run_suite,
    write_results,
)
from harness import Api, HttpClient, ProgressSink
from passport._errors import SpecError
from passport.audit import CANARIES_FILE, CanaryFigures, canary_figures
from passport.run._endpoint import Access
from passport.run._sampler import LoadSampler, every_nth

__all__ = ["load_declared_suite", "run_canaries", "canary_info", "UnderLoad"]


# The bundled default suite of each endpoint kind that cannot take the text cases of `default`
_KIND_DEFAULTS = {"embeddings": "default-embeddings", "rerank": "default-rerank", "score": "default-rerank",
                  "audio_transcriptions": "default-audio"}


def load_declared_suite(name: str, api: str = "chat") -> Suite:
    """The spec's `canaries` suite (a bundled name or a path; `default` is the endpoint kind's
    own default); a SpecError if it cannot be used, or if a case needs another endpoint kind
    than `api` (refused before anything is sent)."""
    if name == "default":
        name = _KIND_DEFAULTS.get(api, name)
    try:
        suite = load_suite(name)
        require_sandbox(suite)
    except CanaryError as exc:
        raise SpecError(f"canaries: {exc}") from None
    for case in suite.cases:
        runs_on = api if case.api == "auto" else case.api
        if runs_on not in CASE_APIS[case.kind]:
            raise SpecError(f"canaries: case {case.id!r} of suite {suite.suite!r} is a {case.kind} case, for "
                            f"endpoint.api {' or '.join(CASE_APIS[case.kind])}, and this run's is {runs_on}; "
                            f"choose a suite for {runs_on} (canaries: default picks one) or none")
    return suite


def run_canaries(suite: Suite, way: Access, model: str, api: Api, t0_ns: int,
                 on_case: Callable[[CaseResult], None] | None = None, engine: str | None = None) -> list[CaseResult]:
    """Run the suite against the endpoint, one case at a time, on a connection of its own."""
    client = way.streams(max_idle=1)

    async def go() -> list[CaseResult]:
        await client.start()
        try:
            return await run_suite(client, suite, model, api, t0_ns, on_case=on_case, engine=engine)
        finally:
            await client.aclose()

    return asyncio.run(go())


def canary_info(suite: Suite, results: list[CaseResult], forced: bool, folder: Path,
                under_load: list[CaseResult] | None = None, share: float = 0.0) -> CanaryFigures:
    """Write every case (the pre-timing gate `results`, then `under_load` cases sampled during
    the timed run) to canaries.parquet and sum them up for the passport, from that file, as
    `passport verify` does."""
    path = folder / CANARIES_FILE
    write_results(path, results + (under_load or []))
    return canary_figures(pq.read_table(path), suite.suite, suite.version, forced,
                          share if under_load is not None else None)


class UnderLoad(LoadSampler):
    """Canaries sampled during the timed run: after every 1/share completed timed requests, the
    next case of the suite (cyclically) is sent on a connection of its own, one at a time, so an
    engine whose answers degrade under load is caught. Verdicts are kept apart from the
    pre-timing gate (phase "under_load" in canaries.parquet)."""

    def __init__(self, suite: Suite, client: HttpClient, model: str, api: Api, t0_ns: int, share: float,
                 inner: ProgressSink | None, engine: str | None = None) -> None:
        super().__init__(client, inner, every_nth(share))
        self.suite, self.model, self.api, self.t0_ns, self.engine = suite, model, api, t0_ns, engine
        self.results: list[CaseResult] = []

    async def send(self, k: int) -> None:
        case = self.suite.cases[k % len(self.suite.cases)]
        self.results.append(await run_case(self.client, self.suite, case, self.model, self.api, self.t0_ns,
                                           "under_load", self.engine))
