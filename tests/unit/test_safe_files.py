"""Files are only what they claim (issue 22): writes into a run folder never follow a planted
symlink, and verify never reads a file the files table places outside the run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq

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
