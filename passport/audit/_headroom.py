"""`results.client.headroom`: what the run asked of its client against what the client can pace.

The run folder's `calibration.json` (written before the timed phase by passport.run._calibration)
holds this client's measured CPU cost on this machine, `cpu_us_per_request` plus
`cpu_us_per_chunk` per streamed event, and the CPU share of one core at which its pacing still
holds (`pacing_cpu_share`), less what it costs per second whatever the rate (`fixed_cpu_share`).
From requests.parquet, every attempt sent (warm-up and retries
included: the client sent them all), over the timed phase (first send to last end):

- `requests_per_s` and `chunks_per_s` (the `n_chunks` of every attempt) the run sent and read;
- `ceiling_requests_per_s`: workers x (pacing_cpu_share - fixed_cpu_share) / (cpu_us_per_request
  + chunks per request x cpu_us_per_chunk), at this run's own mix of chunks per request;
- `factor`: ceiling / requests_per_s. Above 1 the client had room (2: it ran at half what it
  paces); at or below 1 the run asked more than the client paces within 1 ms of dispatch lag,
  and its open-loop arrivals were likely late (dispatch_lag says by how much);
- `predicted_cpu_share`: the CPU share the calibration predicts for this load, per worker, to
  set beside the measured `cpu_share_mean`.

None without a calibration.json (a run before this existed, or no timed phase) or without a
request sent. Pure numpy; an auditor recomputes it from the two files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from passport.audit._files import RunFiles, RunSource
from passport.audit._metrics import numeric_column
from passport.audit._types import HeadroomFigures

__all__ = ["CALIBRATION_FILE", "headroom_figures", "read_calibration", "ceiling_requests_per_s"]

CALIBRATION_FILE = "calibration.json"


def read_calibration(source: RunSource) -> dict[str, Any] | None:
    """The run's calibration.json, or None when the folder has none (or one that is not JSON)."""
    try:
        text = RunFiles.of(source).read(CALIBRATION_FILE)
        data = json.loads(text) if text is not None else None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def headroom_figures(requests: pa.Table, calibration: dict[str, Any] | None) -> HeadroomFigures | None:
    """The headroom of a run (see the module docstring) from its requests and calibration."""
    if calibration is None or not requests.num_rows:
        return None
    sent = numeric_column(requests, "sent_ns")
    ended = numeric_column(requests, "end_ns")
    was_sent = np.isfinite(sent)
    if not was_sent.any():
        return None
    last = np.fmax(ended, sent)[was_sent]
    span_s = (float(np.nanmax(last)) - float(np.nanmin(sent[was_sent]))) / 1e9
    if span_s <= 0:
        return None
    attempts = int(was_sent.sum())
    chunks = float(np.nansum(numeric_column(requests, "n_chunks")[was_sent]))
    workers = 1
    if "worker" in requests.column_names:
        sender = numeric_column(requests, "worker")
        workers = max(1, len({int(w) for w in sender[np.isfinite(sender)]}))
    per_request_us = float(calibration["cpu_us_per_request"])
    per_chunk_us = float(calibration["cpu_us_per_chunk"])
    fixed = float(calibration.get("fixed_cpu_share") or 0.0)
    chunks_per_request = chunks / attempts
    ceiling = workers * ceiling_requests_per_s(calibration, chunks_per_request)
    rate = attempts / span_s
    per_worker_s = (rate * per_request_us + chunks / span_s * per_chunk_us) / 1e6 / workers
    return {"factor": ceiling / rate, "requests_per_s": rate, "chunks_per_s": chunks / span_s,
            "chunks_per_request": chunks_per_request, "workers": workers, "ceiling_requests_per_s": ceiling,
            "predicted_cpu_share": fixed + per_worker_s,
            "calibration": {"cpu_us_per_request": per_request_us, "cpu_us_per_chunk": per_chunk_us,
                            "fixed_cpu_share": fixed, "pacing_cpu_share": float(calibration["pacing_cpu_share"]),
                            "measured_utc": str(calibration.get("measured_utc")), "how": str(calibration.get("how"))}}


def ceiling_requests_per_s(calibration: Mapping[str, Any], chunks_per_request: float) -> float:
    """Requests/s one worker paces at `chunks_per_request` streamed events each: what is left of
    `pacing_cpu_share` after the fixed share, over the CPU of one request and its chunks."""
    cost_s = (float(calibration["cpu_us_per_request"])
              + max(chunks_per_request, 0.0) * float(calibration["cpu_us_per_chunk"])) / 1e6
    left = float(calibration["pacing_cpu_share"]) - float(calibration.get("fixed_cpu_share") or 0.0)
    return max(left, 0.0) / cost_s if cost_s > 0 else float("inf")
