"""Files are only what they claim (issue 22): writes into a run folder never follow a planted
symlink, and verify never reads a file the files table places outside the run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness import REQUESTS_SCHEMA, TableWriter, write_new
from passport.audit import verify_run
from passport.report import Heading, Image, Para, write_reports
from tests.conftest import REPO
from tests.faults import fault

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


@fault("symlinks planted in a run folder (report.md, report.html, plots/, a raw table's parts folder)",
       "written around, never through: each file is a new file renamed over the link, each folder made real; the "
       "links' targets are untouched")
def test_writes_replace_planted_symlinks_instead_of_writing_through_them(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("report.md", "report.html"):
        (run / name).symlink_to(outside / "victim.txt")
    (run / "plots").symlink_to(outside, target_is_directory=True)
    (run / "requests.parts").symlink_to(outside, target_is_directory=True)
    write_reports(run, "t", [Heading("h"), Para("p"), Image("a.png", PNG, "caption")])
    writer = TableWriter(run, "requests", REQUESTS_SCHEMA)
    writer.append_row({"request_id": 1, "outcome": "ok"})
    writer.close()
    assert (outside / "victim.txt").read_text() == "keep me" and sorted(p.name for p in outside.iterdir()) == [
        "victim.txt"]
    for name in ("report.md", "report.html", "plots", "plots/a.png", "requests.parquet"):
        assert not (run / name).is_symlink() and (run / name).exists(), name
    assert pq.read_table(run / "requests.parquet").num_rows == 1
    write_new(run / "declared.json", b"{}")  # and a plain new file is just written
    assert (run / "declared.json").read_bytes() == b"{}" and not list(run.glob(".*.tmp"))


@fault("a files table naming ../../x, /etc/shadow or a symlink in the run folder",
       "verify lists it as a problem and never reads or hashes it (no confirmation of a guessed hash)")
def test_verify_reads_only_plain_files_inside_the_run_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "v1.3", run)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    (run / "link.txt").symlink_to(secret)
    passport = json.loads((run / "passport.json").read_text())
    entry = {"sha256": "0" * 64, "bytes": 6, "rows": None}
    for name in ("../secret.txt", str(secret), "link.txt"):
        passport["files"][name] = entry
    (run / "passport.json").write_text(json.dumps(passport))
    problems = verify_run(run).problems
    assert "../secret.txt: not a plain path inside the run folder; not read" in problems
    assert f"{secret}: not a plain path inside the run folder; not read" in problems
    assert "link.txt: link.txt is a symbolic link; not read" in problems
    assert not any("sha256 differs" in p and "secret" in p for p in problems)


@fault("measured requests removed from requests.parquet (the slowest 5 of 40) with every figure, count, hash and "
       "the content hash recomputed to match", "verify exit 1: the schedule names requests the finished run has no "
       "row for")
def test_rows_dropped_from_the_raw_logs_are_caught_even_when_everything_else_is_recomputed(tmp_path: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tests.forgery import rederive_and_reseal

    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "v1.3", run)
    requests = pq.read_table(run / "requests.parquet")
    e2e = requests["end_ns"].to_numpy() - requests["sent_ns"].to_numpy()
    gone = pa.array(sorted(requests["request_id"].to_numpy()[np.argsort(e2e)[-5:]]))
    pq.write_table(requests.filter(pc.invert(pc.is_in(requests["request_id"], gone))), run / "requests.parquet")
    chunks = pq.read_table(run / "chunks.parquet")
    pq.write_table(chunks.filter(pc.invert(pc.is_in(chunks["request_id"], gone))), run / "chunks.parquet")
    rederive_and_reseal(run)
    problems = verify_run(run).problems
    assert len(problems) == 1, problems  # every figure agrees with the doctored logs
    assert problems[0].startswith("requests.parquet: 5 scheduled requests of a finished run have no row")


@fault("a passport.json of 65 MiB (or a 1 GB one), an extra key with a million entries",
       "verify, gate and show: exit 2 with one message (the size and the cap; the field that does not fit), read "
       "before nothing is loaded whole, no traceback")
@pytest.mark.slow
def test_an_oversized_or_misshapen_passport_is_one_clear_input_error(tmp_path: Path) -> None:
    from passport.audit import content_sha256
    from tests.conftest import run_cli

    huge = tmp_path / "huge"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "v1.3", huge)
    with (huge / "passport.json").open("r+b") as f:
        f.truncate(65 * 2**20)
    odd = tmp_path / "odd"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "v1.3", odd)
    passport = json.loads((odd / "passport.json").read_text())
    passport["extra"] = {str(i): i for i in range(1_000_000)}
    passport["content_sha256"] = content_sha256(passport)  # resealed: only the shape is wrong
    (odd / "passport.json").write_text(json.dumps(passport))
    for run, said in ((huge, "is 68,157,440 bytes; a passport is at most 67,108,864"),
                      (odd, "is not a passport this version reads: extra: Extra inputs are not permitted")):
        for command in (["verify", str(run)], ["gate", str(run), "--require", "verdict == VALID", "--allow-unsigned"],
                        ["show", str(run), "--allow-unsigned"]):  # v1.3: from before passports were signed
            result = run_cli(*command)
            assert result.returncode == 2 and said in result.stderr, (command, result.stderr[-300:])
            assert "Traceback" not in result.stderr
