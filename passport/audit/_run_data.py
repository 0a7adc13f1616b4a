"""A run folder's raw tables read once, with the masks every figure uses: the one record the
results, the discard rules and the comparisons read (`passport.audit._results.read_run` builds it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from passport.audit._declared import Declarations
from passport.audit._files import RunFiles
from passport.audit._types import DiscardFigures

__all__ = ["RunData"]


@dataclass(frozen=True)
class RunData:
    """One entry per request row in every array. `measured` (measure phase, not superseded, its
    repetition not discarded) and `discard` are the discard rules' outcome; the rules themselves
    are evaluated on the record before them (measure phase alone, nothing discarded)."""

    files: RunFiles  # what they were read through (checked, when opened by the door)
    requests: pa.Table
    telemetry: pa.Table | None
    declared: Declarations
    engine_log: str  # engine.log's text, "" without one
    latencies: dict[str, np.ndarray]
    gaps_by_request: dict[int, np.ndarray]  # inter-chunk gaps (s) of each successful request
    token_gaps_by_request: dict[int, np.ndarray]  # itl.token samples (s) of each successful request
    request_ids: np.ndarray
    repetition: np.ndarray
    success: np.ndarray
    canaries: pa.Table | None  # canaries.parquet (gate and under-load cases), when the run has one
    accuracy: pa.Table | None  # accuracy.parquet (items alone and under load), when the run declared accuracy
    measured: np.ndarray
    discard: DiscardFigures

    @property
    def ok_measured(self) -> np.ndarray:
        both: np.ndarray = self.measured & self.success
        return both

    @property
    def n_failed(self) -> int:
        return int((self.measured & ~self.success).sum())
