"""What the run's probes.jsonl says about the model: the id the run asked for and the ids the
server's `/v1/models` listed, for the `model_listed` rule (rules version 5 on).

probes.jsonl is written by the run before anything is timed (`passport.run._replay`): a first
line naming the endpoint and the model, then each control-plane exchange as it happened. Read
here without the network; a file that is missing or malformed gives None, never an error.
"""

from __future__ import annotations

import json

from passport.audit._files import PROBES_FILE, RunFiles, RunSource

__all__ = ["ModelListing", "model_listing"]

_MAX_BYTES = 16 << 20  # the probes' answers are each bounded (limits.control_bytes); this bounds the file


ModelListing = tuple[str, list[str] | None]  # (the model asked for, the ids /v1/models listed or None)


def model_listing(source: RunSource) -> ModelListing | None:
    """(the model the run asked for, the ids the first successful GET …/models listed, or None
    when no such answer was recorded); None without a readable probes.jsonl."""
    try:
        text = RunFiles.of(source).text(PROBES_FILE, _MAX_BYTES)
        if text is None:
            return None
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    if not lines or not isinstance(lines[0], dict) or not isinstance(lines[0].get("model"), str):
        return None
    for exchange in lines[1:]:
        if not (isinstance(exchange, dict) and exchange.get("method") == "GET"
                and str(exchange.get("path")).endswith("/models") and exchange.get("status") == 200):
            continue
        try:
            data = json.loads(exchange.get("body") or "").get("data")
        except (ValueError, AttributeError):
            continue
        if isinstance(data, list):
            return lines[0]["model"], [str(card["id"]) for card in data if isinstance(card, dict) and "id" in card]
    return lines[0]["model"], None
