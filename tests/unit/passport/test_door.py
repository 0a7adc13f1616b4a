"""The door's parts on hand-made inputs: what a passport's own records imply about its schema
version (a downgrade), the trusted keys from flags and the environment, and the checked reader
of a run folder's files (the bytes it hands on are the bytes it hashed)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from passport._errors import RunFolderError
from passport.audit import RunFiles, TamperedFileError, Trust
from passport.audit._versions import downgrade_problem


def _passport(schema: str, rules: int | None = None, layout: int | None = None, signed: bool = False,
              sealed: bool = False, rule_names: tuple[str, ...] = ()) -> dict[str, Any]:
    libraries = {**({"passport.rules": str(rules)} if rules else {}),
                 **({"passport.report-layout": str(layout)} if layout else {})}
    return {"schema_version": schema, "protocol": {"harness": {"libraries": libraries}},
            "validity": {"rules": [{"name": n} for n in rule_names]},
            **({"signature": {"fingerprint": "sha256:" + "1" * 32}} if signed else {}),
            **({"content_sha256": "0" * 64} if sealed else {})}


@pytest.mark.parametrize(("passport", "said"), [
    (_passport("1.4", 5, 2, signed=True, sealed=True, rule_names=("server_counters", "model_listed")), None),
    (_passport("1.3", 3, 2, sealed=True), None),  # rules 3 and layout 2 were written by schema 1.3
    (_passport("1.2"), None),  # an old passport: nothing in it is newer than it says
    (_passport("1.3", 3, 2, signed=True, sealed=True), "a signature was first written by schema 1.4"),
    (_passport("1.3", 4, 2, sealed=True), "rules version 4 was first written by schema 1.4"),
    (_passport("1.2", 2), "rules version 2 was first written by schema 1.3"),
    (_passport("1.2", layout=2), "report layout 2 was first written by schema 1.3"),
    (_passport("1.2", sealed=True), "a content hash was first written by schema 1.3"),
    (_passport("1.4", 3, 2, signed=True, sealed=True, rule_names=("server_counters",)),
     "rule server_counters was first judged by rules version 4"),
    (_passport("1.4", 4, 2, signed=True, sealed=True, rule_names=("model_listed",)),
     "rule model_listed was first judged by rules version 5"),
])
def test_a_passport_claiming_to_be_older_than_its_own_records_is_a_downgrade(passport: dict[str, Any],
                                                                            said: str | None) -> None:
    problem = downgrade_problem(passport)
    assert (problem is None) if said is None else (problem is not None and said in problem), problem


def test_trusted_keys_come_from_flags_and_the_environment_once_each() -> None:
    a, b = "sha256:" + "a" * 32, "sha256:" + "b" * 32
    trust = Trust.of([a], environ={"PASSPORT_TRUSTED_KEYS": f" {b},{a}  "})
    assert trust.keys == (a, b) and not trust.allow_unsigned
    assert Trust.of([], True, environ={}).keys == () and Trust.of([], True, environ={}).allow_unsigned
    with pytest.raises(RunFolderError, match="--key 'sha256:abc' is not a key fingerprint"):
        Trust.of(["sha256:abc"], environ={})


@given(st.text(max_size=80))
def test_any_trusted_keys_setting_is_keys_or_one_clear_error(text: str) -> None:
    try:
        keys = Trust.of([], environ={"PASSPORT_TRUSTED_KEYS": text}).keys
    except RunFolderError as exc:
        assert "PASSPORT_TRUSTED_KEYS" in str(exc) and "is not a key fingerprint" in str(exc)
    else:
        assert all(k.startswith("sha256:") and len(k) == 39 for k in keys)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "requests.parquet")
    (tmp_path / "engine.log").write_text("ready\n")
    listed = {name: _sha((tmp_path / name).read_bytes()) for name in ("requests.parquet", "engine.log")}
    return tmp_path, listed


def test_a_checked_reader_hands_on_the_bytes_whose_hash_is_listed(tmp_path: Path) -> None:
    folder, listed = _folder(tmp_path)
    files = RunFiles(folder, listed)
    assert files.table("requests").column("x").to_pylist() == [1, 2, 3]  # type: ignore[union-attr]
    assert files.text("engine.log") == "ready\n" and files.read("declared.json") is None
    (folder / "engine.log").write_text("ready!\n")
    with pytest.raises(TamperedFileError, match="engine.log was changed after its passport was sealed"):
        files.read("engine.log")
    assert RunFiles(folder).text("engine.log") == "ready!\n"  # unchecked: what is there


def test_a_checked_reader_refuses_added_missing_linked_and_special_files(tmp_path: Path) -> None:
    folder, listed = _folder(tmp_path)
    (folder / "declared.json").write_text("{}")
    with pytest.raises(TamperedFileError, match="declared.json is not in its passport's files table"):
        RunFiles(folder, listed).read("declared.json")
    (folder / "requests.parts").mkdir()
    pq.write_table(pa.table({"x": [9]}), folder / "requests.parts" / "part-000001.parquet")
    (folder / "requests.parquet").unlink()
    with pytest.raises(TamperedFileError, match="requests.parquet is listed in its passport but missing"):
        RunFiles(folder, listed).table("requests")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-log"
    elsewhere.write_text("ready\n")  # the listed bytes, outside the folder
    (folder / "engine.log").unlink()
    (folder / "engine.log").symlink_to(elsewhere)
    with pytest.raises(TamperedFileError, match="engine.log is a symbolic link"):
        RunFiles(folder, listed).read("engine.log")
    (folder / "engine.log").unlink()
    os.mkfifo(folder / "engine.log")  # opened without blocking, refused
    with pytest.raises(TamperedFileError, match="engine.log is not a regular file"):
        RunFiles(folder, listed).read("engine.log")


def test_a_killed_runs_parts_are_read_as_listed_and_an_added_part_is_refused(tmp_path: Path) -> None:
    parts = tmp_path / "requests.parts"
    parts.mkdir()
    for i in (1, 2):
        pq.write_table(pa.table({"x": [i]}), parts / f"part-{i:06d}.parquet")
    listed = {f"requests.parts/{p.name}": _sha(p.read_bytes()) for p in parts.iterdir()}
    assert RunFiles(tmp_path, listed).table("requests").column("x").to_pylist() == [1, 2]  # type: ignore[union-attr]
    pq.write_table(pa.table({"x": [3]}), parts / "part-000003.parquet")
    with pytest.raises(TamperedFileError, match="part-000003.parquet is not in its passport's files table"):
        RunFiles(tmp_path, listed).table("requests")
