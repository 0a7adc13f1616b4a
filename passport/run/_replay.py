"""Identity, checked against what the endpoint said: probes.jsonl replayed through the probes.

`identify` keeps every control-plane exchange it made (method, path, request body, status,
response body; never headers) in probes.jsonl. `replay_identity` answers the same probes from
that file instead of the network and compares each `probed` identity field of the passport with
what the probes derive now: a hand-edited engine, model or capacity field is caught, and so is a
probe whose reading changed between passport versions.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

import httpx

from harness import ControlClient, engines, scrub_json, write_new
from passport.audit import PROBES_FILE, canonical_json
from passport.model import Passport

__all__ = ["PROBES_FILE", "write_probes", "replay_identity"]


def write_probes(folder: Path, base_url: str, model_id: str, api: str, exchanges: list[dict[str, Any]]) -> None:
    """probes.jsonl: a first line naming the endpoint, then one exchange per line."""
    lines = [json.dumps({"base_url": base_url, "model": model_id, "api": api})]
    lines += [json.dumps(scrub_json(e), ensure_ascii=False) for e in exchanges]
    write_new(folder / PROBES_FILE, ("\n".join(lines) + "\n").encode())


def _key(method: str, path: str, body: Any) -> tuple[str, str, bytes]:
    return method, path, canonical_json(body)


def replay_identity(passport: Passport, folder: Path) -> list[str]:
    """Each `probed` identity field that the recorded probes no longer give (empty: all agree)."""
    path = folder / PROBES_FILE
    if PROBES_FILE not in passport.files or not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    head, exchanges = lines[0], lines[1:]
    answers: dict[tuple[str, str, bytes], deque[dict[str, Any]]] = defaultdict(deque)
    for e in exchanges:
        answers[_key(e["method"], e["path"], e["request"])].append(e)

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        queue = answers.get(_key(request.method, request.url.raw_path.decode(), body))
        if not queue:
            return httpx.Response(599, text="not recorded")
        e = queue.popleft() if len(queue) > 1 else queue[0]
        if e["status"] is None:  # the same failure as then (a reset is tried again, as it was live)
            failure = getattr(httpx, str(e.get("error_type")), None)
            if not (isinstance(failure, type) and issubclass(failure, httpx.TransportError)):
                failure = httpx.ConnectError
            raise failure(e.get("error") or "no answer was recorded", request=request)
        return httpx.Response(e["status"], text=e["body"] or "")

    base_url = str(head["base_url"])
    with ControlClient(base_url, transport=httpx.MockTransport(answer)) as control:
        cards = control.models()
        derived = engines.probe_identity(control, cards, str(head["model"]), base_url, str(head["api"]))
    recorded = {k: v for k, v in passport.identity.items() if v.source == "probed"}
    problems = []
    for key in sorted(set(recorded) | set(derived)):
        if key not in derived:
            problems.append(f"identity.{key}: the passport says {recorded[key].value!r} (probed), but the recorded "
                            "probes give nothing")
        elif key not in recorded:
            problems.append(f"identity.{key}: the recorded probes give {derived[key][0]!r}, missing from the passport")
        elif (recorded[key].value, recorded[key].via) != derived[key]:
            problems.append(f"identity.{key}: the passport says {recorded[key].value!r} via {recorded[key].via!r}, "
                            f"the recorded probes give {derived[key][0]!r} via {derived[key][1]!r}")
    return problems
