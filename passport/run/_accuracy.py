"""The accuracy sets of a run (spec `accuracy`): each item scored alone, one at a time before
timing, and under load, sent beside the timed load at a share of its completions; every answer
in accuracy.parquet, which `passport verify` scores again (`passport.audit._accuracy`).

Items are sent greedy (temperature 0, seed 42) with their own max_tokens and stop sequences, as
the user message on chat endpoints and as the prompt on completions. Under load, the items of
every set are interleaved in a seeded order (cycling when the load outlasts them), at most
`_ITEMS_IN_FLIGHT` at once, each row recording how many timed requests were in flight when it
was sent: the load it met.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from canaries import GREEDY, AccuracyItem, AccuracySet, CanaryError, load_accuracy_set, send_body
from harness import ANTHROPIC_SAMPLING, KINDS, SUCCESS_OUTCOMES, Api, HttpClient, ProgressSink, request_body, scrub
from passport._errors import SpecError
from passport.audit import ACCURACY_FILE, ACCURACY_SCHEMA, score
from passport.model import AccuracySpec
from passport.run._endpoint import Access
from passport.run._sampler import LoadSampler, seeded_positions

__all__ = ["load_declared_sets", "run_alone", "AccuracyUnderLoad", "write_accuracy", "sets_protocol"]

_ITEMS_IN_FLIGHT = 4
Row = dict[str, Any]


def load_declared_sets(spec: AccuracySpec) -> list[AccuracySet]:
    """Every declared set, materialized (a SpecError naming the set if one cannot be)."""
    out = []
    for declared in spec.sets:
        try:
            out.append(load_accuracy_set(declared.set, declared.format, declared.items, declared.difficulty,
                                         declared.seed, declared.max_tokens, declared.name))
        except CanaryError as exc:
            raise SpecError(f"accuracy: {exc}") from None
    return out


def sets_protocol(sets: list[AccuracySet], spec: AccuracySpec) -> dict[str, Any]:
    """What the protocol records of the sets: each one's source, item count, scorers and hash."""
    return {"share_under_load": spec.share, "alone": spec.alone,
            "sets": [{"name": s.name, "source": s.source, "n_items": len(s.items), "sha256": s.sha256,
                      "scorers": sorted({i.scorer for i in s.items})} for s in sets]}


def _body(item: AccuracyItem, api: Api, model: str) -> tuple[bytes, str]:
    """(body, Content-Type) of one item in `api`'s own form, greedy, with the item's stop."""
    params: dict[str, Any] = dict(GREEDY)
    if item.stop:
        params["stop_sequences" if api == "anthropic_messages" else "stop"] = list(item.stop)
    if api == "anthropic_messages":
        params = {k: v for k, v in params.items() if k in ANTHROPIC_SAMPLING}
    return request_body(api, model, item.prompt, item.max_tokens, params)


async def _answer(client: HttpClient, accuracy_set: AccuracySet, item: AccuracyItem, model: str, api: Api,
                  t0_ns: int, phase: str, in_flight: int | None) -> Row:
    """One item sent and scored: its accuracy.parquet row."""
    start = time.perf_counter_ns()
    ex, summary, outcome, error = await send_body(client, KINDS[api].path, _body(item, api, model), api)
    end = time.perf_counter_ns()
    content = summary.content if summary is not None else ""
    judged = score(item.scorer, item.reference, content, item.tolerance) if outcome in SUCCESS_OUTCOMES else None
    return {
        "set": accuracy_set.name, "set_sha256": accuracy_set.sha256, "item_id": item.id, "phase": phase,
        "scorer": item.scorer, "reference": item.reference, "tolerance": item.tolerance, "prompt": item.prompt,
        "content": scrub(content), "extracted": None if judged is None else judged.extracted,
        "correct": None if judged is None else judged.correct, "outcome": outcome,
        "error": scrub(error) if error else None, "http_status": ex.status or None,
        "finish_reason": summary.finish_reason if summary else None,
        "completion_tokens": summary.completion_tokens if summary else None, "max_tokens": item.max_tokens,
        "in_flight": in_flight, "sent_ns": start - t0_ns, "end_ns": end - t0_ns,
    }


def run_alone(sets: list[AccuracySet], way: Access, model: str, api: Api, t0_ns: int,
              say: Callable[[str], None]) -> list[Row]:
    """Every item of every set, one at a time on a connection of its own, before timing."""
    client = way.streams(max_idle=1)

    async def go() -> list[Row]:
        await client.start()
        rows: list[Row] = []
        try:
            for accuracy_set in sets:
                mine = [await _answer(client, accuracy_set, item, model, api, t0_ns, "alone", None)
                        for item in accuracy_set.items]
                right = sum(bool(r["correct"]) for r in mine)
                failed = sum(r["correct"] is None for r in mine)
                say(f"  accuracy alone, {accuracy_set.name}: {right} of {len(mine) - failed} right"
                    + (f" ({failed} requests failed)" if failed else ""))
                rows += mine
        finally:
            await client.aclose()
        return rows

    return asyncio.run(go())


class AccuracyUnderLoad(LoadSampler):
    """Items sent beside the timed load: one at each seeded completion count (`seeded_positions`),
    the sets' items interleaved in a seeded order, at most `_ITEMS_IN_FLIGHT` at once."""

    def __init__(self, sets: list[AccuracySet], spec: AccuracySpec, client: HttpClient, model: str, api: Api,
                 t0_ns: int, total: int | None, seed: int, inner: ProgressSink | None) -> None:
        super().__init__(client, inner, seeded_positions(spec.share, total, seed))
        self.model, self.api, self.t0_ns = model, api, t0_ns
        self.order = [(s, item) for s in sets for item in s.items]
        random.Random(f"accuracy-order:{seed}").shuffle(self.order)
        self.rows: list[Row] = []
        self._slots = asyncio.Semaphore(_ITEMS_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, k: int) -> None:
        accuracy_set, item = self.order[k % len(self.order)]
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(self._one(accuracy_set, item, self.in_flight))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _one(self, accuracy_set: AccuracySet, item: AccuracyItem, in_flight: int) -> None:
        try:
            self.rows.append(await _answer(self.client, accuracy_set, item, self.model, self.api, self.t0_ns,
                                           "under_load", in_flight))
        finally:
            self._slots.release()

    async def settle(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def write_accuracy(folder: Path, rows: list[Row]) -> None:
    """accuracy.parquet: every item answered, alone then under load."""
    pq.write_table(pa.Table.from_pylist(rows, schema=ACCURACY_SCHEMA), folder / ACCURACY_FILE, compression="zstd")
