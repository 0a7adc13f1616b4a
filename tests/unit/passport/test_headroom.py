"""The client's headroom and its calibration cache: hand-computed fixtures for the figures, a
stand-in measurement (counted) for when the cache is read, refused or written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from passport.audit import CALIBRATION_FILE
from passport.audit._headroom import ceiling_requests_per_s, headroom_figures, read_calibration
from passport.run import _calibration
from passport.run._calibration import ClientCalibration, client_calibration, fit_cost
from passport.run._plan import utc_now

CAL = {"cpu_us_per_request": 200.0, "cpu_us_per_chunk": 10.0, "pacing_cpu_share": 0.3,
       "measured_utc": "2026-12-04T00:00:00Z", "how": "measured"}


def _requests(sent_s: list[float | None], end_s: list[float | None], chunks: list[int],
              worker: list[int] | None = None) -> pa.Table:
    columns = {"sent_ns": pa.array([None if s is None else int(s * 1e9) for s in sent_s], pa.int64()),
               "end_ns": pa.array([None if e is None else int(e * 1e9) for e in end_s], pa.int64()),
               "n_chunks": pa.array(chunks, pa.int32())}
    if worker is not None:
        columns["worker"] = pa.array(worker, pa.int16())
    return pa.table(columns)


def test_headroom_by_hand_one_worker() -> None:
    # 4 attempts sent over 2 s (first send 1 s, last end 3 s): 2 requests/s; 4 + 6 + 10 + 0 chunks
    # = 20 chunks, 5 per attempt, 10 chunks/s. Cost 200 + 5 x 10 = 250 us; ceiling 0.3 / 250e-6 =
    # 1,200 requests/s; factor 600; predicted CPU share 2 x 250e-6 = 5e-4.
    table = _requests([1.0, 1.5, 2.0, 2.5], [1.2, 2.0, 3.0, None], [4, 6, 10, 0])
    h = headroom_figures(table, CAL)
    assert h is not None
    assert h["requests_per_s"] == pytest.approx(2.0)
    assert h["chunks_per_s"] == pytest.approx(10.0)
    assert h["chunks_per_request"] == pytest.approx(5.0)
    assert h["ceiling_requests_per_s"] == pytest.approx(1200.0)
    assert h["factor"] == pytest.approx(600.0)
    assert h["predicted_cpu_share"] == pytest.approx(5e-4)
    assert h["workers"] == 1 and h["calibration"]["how"] == "measured"


def test_headroom_counts_each_worker_and_skips_attempts_never_sent() -> None:
    # Two workers: the ceiling doubles, the predicted share is per worker. The unsent row (no
    # sent_ns: refused before its send) counts neither as a request nor in the span.
    table = _requests([0.0, 1.0, None], [1.0, 2.0, None], [2, 2, 0], worker=[0, 1, 1])
    h = headroom_figures(table, CAL)
    assert h is not None
    assert h["requests_per_s"] == pytest.approx(1.0)  # 2 sent over 2 s
    assert h["ceiling_requests_per_s"] == pytest.approx(2 * 0.3 / 220e-6)
    assert h["predicted_cpu_share"] == pytest.approx(1.0 * 220e-6 / 2)
    assert h["workers"] == 2


def test_no_headroom_without_a_calibration_or_without_a_send(tmp_path: Path) -> None:
    assert headroom_figures(_requests([1.0], [2.0], [3]), None) is None
    assert headroom_figures(_requests([None], [None], [0]), CAL) is None
    assert read_calibration(tmp_path) is None
    (tmp_path / CALIBRATION_FILE).write_text("not json")
    assert read_calibration(tmp_path) is None


def test_the_ceiling_falls_with_longer_answers() -> None:
    calibration = ClientCalibration(300.0, 20.0, 0.3, "2026-12-04T00:00:00Z", "k", "measured", [])
    assert calibration.ceiling_requests_per_s(0) == pytest.approx(1000.0)
    assert calibration.ceiling_requests_per_s(35) == pytest.approx(300.0)


def test_the_cache_is_read_when_valid_and_measured_again_when_not(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PASSPORT_CACHE", str(tmp_path))
    calls: list[str] = []

    def measure(key: str) -> ClientCalibration:
        calls.append(key)
        return ClientCalibration(100.0 + len(calls), 5.0, 0.3, utc_now(), key, "measured", [])

    monkeypatch.setattr(_calibration, "_measure", measure)
    first = client_calibration()
    assert first.how == "measured" and len(calls) == 1
    again = client_calibration()
    assert again.how == "cached" and again.cpu_us_per_request == first.cpu_us_per_request and len(calls) == 1
    (path,) = (tmp_path / "calibration").glob("client-*.json")

    path.write_text("{truncated")  # a corrupt file is measured again, not fatal
    assert client_calibration().how == "measured" and len(calls) == 2

    stale = json.loads(path.read_text()) | {"measured_utc": "2020-01-01T00:00:00Z"}
    path.write_text(json.dumps(stale))
    assert client_calibration().how == "measured" and len(calls) == 3

    other = json.loads(path.read_text()) | {"key": "another-harness"}
    path.write_text(json.dumps(other))
    assert client_calibration().how == "measured" and len(calls) == 4

    assert client_calibration(fresh=True).how == "measured" and len(calls) == 5
    assert not list((tmp_path / "calibration").glob("*.partial"))


def _point(rate: float, chunks_per_s: float, share: float) -> dict[str, float]:
    return {"requests_per_s": rate, "chunks_per_s": chunks_per_s, "cpu_share": share}


def test_the_fit_recovers_the_terms_the_points_were_made_from() -> None:
    # share = 0.1 + rate x 400 us + chunks/s x 20 us, at the calibration's three shapes
    made = [_point(r, c, 0.1 + r * 400e-6 + c * 20e-6) for r, c in ((200, 400), (600, 1200), (200, 6600))]
    assert fit_cost(made) == pytest.approx((0.1, 400e-6, 20e-6))


def test_a_negative_term_from_noise_is_held_at_zero_and_the_rest_refitted() -> None:
    # points that lie on a line with a negative intercept (-0.05): the intercept is dropped and the
    # per-request and per-chunk costs fitted through zero, never a negative cost
    made = [_point(r, c, -0.05 + r * 400e-6 + c * 20e-6) for r, c in ((200, 400), (600, 1200), (200, 6600))]
    fixed, per_request, per_chunk = fit_cost(made)
    assert fixed == 0.0 and per_request > 0 and per_chunk > 0
    for p in made:  # still near what was measured
        assert p["requests_per_s"] * per_request + p["chunks_per_s"] * per_chunk == pytest.approx(p["cpu_share"],
                                                                                                  abs=0.05)


def test_the_fixed_share_is_taken_off_the_budget_before_the_ceiling() -> None:
    calibration = {**CAL, "fixed_cpu_share": 0.1}  # 0.3 - 0.1 = 0.2 left, over 250 us at 5 chunks each
    assert ceiling_requests_per_s(calibration, 5) == pytest.approx(800.0)
    assert ceiling_requests_per_s({**CAL, "fixed_cpu_share": 0.4}, 5) == 0.0  # nothing left
