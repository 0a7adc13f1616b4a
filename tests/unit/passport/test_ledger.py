"""The ledger's store and change detector without a run: many processes appending at once, files
that are not the ledger's, and the detector on hand-made histories whose answer is known."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from passport.ledger._history import WINDOW, Point, _detect
from passport.ledger._store import ledger_files, write_rows


def _append(args: tuple[str, int, int]) -> int:
    ledger, worker, count = args
    written = 0
    for k in range(count):
        # each worker writes its own files, and every worker also tries the same shared ones
        for stem in (f"w{worker}-{k}", f"shared-{k}"):
            row = {"run_id": stem, "created_utc": "2026-12-04T00:00:00Z", "ttft.any.p99": float(k)}
            written += write_rows(Path(ledger), "runs", [row], row["created_utc"], stem) is not None
    return written


def test_parallel_appends_lose_nothing_and_add_each_passport_once(tmp_path: Path) -> None:
    workers, count = 6, 15
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        written = pool.map(_append, [(str(tmp_path), w, count) for w in range(workers)])
    files = ledger_files(tmp_path, "runs")
    assert not files.skipped
    stems = sorted(p.stem for p in files.good)
    own = [f"w{w}-{k}" for w in range(workers) for k in range(count)]
    expected = sorted(own + [f"shared-{k}" for k in range(count)])
    assert stems == expected  # every own file, and each shared one exactly once
    assert sum(written) == len(expected)  # a writer that lost a race was told so, and wrote nothing
    assert not list(tmp_path.rglob("*.partial"))
    table = pa.concat_tables([pq.read_table(p) for p in files.good])
    assert table.num_rows == len(expected)


def test_foreign_corrupt_and_misplaced_files_are_named_and_skipped(tmp_path: Path) -> None:
    good = write_rows(tmp_path, "runs", [{"run_id": "a", "created_utc": "2026-12-04T00:00:00Z"}],
                      "2026-12-04T00:00:00Z", "a-1")
    arms = write_rows(tmp_path, "arms", [{"arm": "x", "created_utc": "2026-12-04T00:00:00Z"}],
                      "2026-12-04T00:00:00Z", "c-1")
    assert good is not None and arms is not None
    partition = good.parent
    (partition / "truncated.parquet").write_bytes(good.read_bytes()[:40])
    pq.write_table(pa.table({"x": [1]}), partition / "foreign.parquet")  # Parquet, not the ledger's
    (partition / "notes.txt").write_text("hello")
    (partition / "moved.parquet").write_bytes(arms.read_bytes())  # an arms file among the runs
    files = ledger_files(tmp_path, "runs")
    assert files.good == [good]
    why = {p.name: reason for p, reason in files.skipped}
    assert set(why) == {"truncated.parquet", "foreign.parquet", "notes.txt", "moved.parquet"}
    assert "not readable Parquet" in why["truncated.parquet"]
    assert "no passport.ledger metadata" in why["foreign.parquet"]
    assert "'arms' file" in why["moved.parquet"]


def test_an_empty_column_gets_the_type_later_files_give_it(tmp_path: Path) -> None:
    written = write_rows(tmp_path, "runs", [{"run_id": "a", "identity.engine.build": None, "ttft.any.p99": None}],
                         "2026-12-04T00:00:00Z", "a-1")
    assert written is not None
    schema = pq.read_schema(written)
    assert schema.field("identity.engine.build").type == pa.string()
    assert schema.field("ttft.any.p99").type == pa.float64()


def _point(value: float | None, half: float = 1.0, verdict: str = "VALID", series: str = "s", build: str = "b1"
           ) -> Point:
    low = None if value is None else value - half
    high = None if value is None else value + half
    return Point("r", "t", verdict, value, low, high, build, series, "/", {"engine.build": build})


def test_a_point_outside_every_recent_interval_is_flagged() -> None:
    history = [_point(10.0 + k * 0.2) for k in range(WINDOW)] + [_point(20.0, build="b2")]
    _detect(history, WINDOW)
    assert [p.flagged for p in history] == [False] * WINDOW + [True]
    assert history[-1].changes == ["engine.build: b1 -> b2"]


def test_a_point_whose_interval_touches_the_envelope_is_not_flagged() -> None:
    # envelope [9, 11.8]; the new point's interval [11.5, 13.5] overlaps it: not separated
    history = [_point(10.0 + k * 0.2) for k in range(WINDOW)] + [_point(12.5)]
    _detect(history, WINDOW)
    assert not any(p.flagged for p in history)


def test_too_short_a_history_flags_nothing_and_invalid_runs_neither_count_nor_get_flagged() -> None:
    short = [_point(10.0) for _ in range(WINDOW - 1)] + [_point(50.0)]
    _detect(short, WINDOW)
    assert not any(p.flagged for p in short)
    # four VALID points and an INVALID one: still too few VALID ones before the jump
    mixed = [_point(10.0) for _ in range(WINDOW - 1)] + [_point(10.0, verdict="INVALID"), _point(50.0)]
    _detect(mixed, WINDOW)
    assert not any(p.flagged for p in mixed)
    wild = [_point(10.0) for _ in range(WINDOW)] + [_point(50.0, verdict="INVALID")]
    _detect(wild, WINDOW)
    assert not wild[-1].flagged
    # and each point that is not judged says why, so a newcomer's history is not read as "no change"
    assert short[-1].unjudged == f"the series has {WINDOW - 1} earlier VALID runs; the change detector needs {WINDOW}"
    assert short[0].unjudged == f"the series has 0 earlier VALID runs; the change detector needs {WINDOW}"
    assert mixed[WINDOW - 1].unjudged == "INVALID: its figures measure nothing the series compares"
    assert wild[WINDOW].unjudged == "INVALID: its figures measure nothing the series compares"
    judged = [_point(10.0) for _ in range(WINDOW)] + [_point(10.0)]
    _detect(judged, WINDOW)
    assert judged[-1].unjudged is None and not judged[-1].flagged


def test_series_of_different_workloads_never_mix() -> None:
    history = [_point(10.0, series="a") for _ in range(WINDOW)] + [_point(50.0, series="b")]
    _detect(history, WINDOW)
    assert not history[-1].flagged and history[-1].changes == []


@pytest.mark.parametrize("noise", [0.0, 0.3, 0.6])
def test_an_unchanged_build_is_not_flagged_within_its_own_spread(noise: float) -> None:
    # values wander within +-noise while each interval is +-1: never separated from the envelope
    values = [10.0 + noise * ((-1) ** k) for k in range(3 * WINDOW)]
    history = [_point(v) for v in values]
    _detect(history, WINDOW)
    assert not any(p.flagged for p in history)


@pytest.mark.parametrize(("stem", "created"), [
    ("../../outside", "2026-12-04T00:00:00Z"), ("/etc/x", "2026-12-04T00:00:00Z"), ("a/b", "2026-12-04T00:00:00Z"),
    ("ok", "../../x"), ("ok", "2099/01/01"), ("", "2026-12-04T00:00:00Z"), ("a..b", "2026-12-04T00:00:00Z"),
])
def test_a_name_that_could_be_a_path_writes_nothing(tmp_path: Path, stem: str, created: str) -> None:
    ledger = tmp_path / "ledger"
    with pytest.raises(ValueError, match="cannot name a ledger file"):
        write_rows(ledger, "runs", [{"run_id": stem}], created, stem)
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob("*.partial"))


def test_a_planted_symlink_in_the_ledger_is_never_written_through(tmp_path: Path) -> None:
    ledger, elsewhere = tmp_path / "ledger", tmp_path / "elsewhere"
    (ledger / "runs").mkdir(parents=True)
    elsewhere.mkdir()
    (ledger / "runs" / "date=2026-12-04").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="is a symbolic link"):
        write_rows(ledger, "runs", [{"run_id": "r"}], "2026-12-04T00:00:00Z", "r")
    assert list(elsewhere.iterdir()) == []


def test_only_regular_files_are_read_and_no_link_is_followed(tmp_path: Path) -> None:
    import os

    ledger = tmp_path / "ledger"
    good = write_rows(ledger, "runs", [{"run_id": "r", "ttft.any.p99": 1.0}], "2026-12-04T00:00:00Z", "r")
    assert good is not None
    part = good.parent
    os.mkfifo(part / "fifo.parquet")  # a reader that opened it would wait forever
    (part / "link.parquet").symlink_to(good)
    outside = tmp_path / "outside"
    outside.mkdir()
    pq.write_table(pa.table({"x": [1]}), outside / "o.parquet")
    (ledger / "runs" / "date=2026-12-05").symlink_to(outside)
    files = ledger_files(ledger, "runs")
    assert files.good == [good]
    assert dict((p.name, why) for p, why in files.skipped) == {
        "fifo.parquet": "not a regular file (a FIFO, a device or a socket): not opened",
        "link.parquet": "a symbolic link: not followed", "date=2026-12-05": "a symbolic link: not followed"}
