"""The run folder's files as an auditor reads them: tables (or a killed run's parts), sha256.

`RAW_FILES` are the files a passport lists with their sha256, size and row count. `RunFiles` is
the one way passport reads them back: `<name>.parquet` or the `<name>.parts/` a killed run
leaves, declared.json, engine.log, probes.jsonl. Opened on a folder alone it reads what is there
(the run writing its passport, `recover`, verify's recomputation, which reports each file's hash
itself). Opened with the passport's files table (`passport.audit.open_run`, the door every
command that acts on a run goes through) each read hashes the bytes it read and parses those same
bytes, so a file changed after the passport was sealed, or swapped between a check and a read,
is refused by name. pyarrow only.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from passport._errors import RunFolderError, UntrustedRunError
from passport.audit._types import FileFacts

__all__ = ["PROBES_FILE", "RAW_FILES", "REPORT_FILES", "TEXT_COLUMNS", "sha256_file", "sha256_bytes",
           "file_entries", "RunFiles", "RunSource", "TamperedFileError", "content_sha256", "canonical_json",
           "not_inside"]

PROBES_FILE = "probes.jsonl"  # the control-plane exchanges of identify (passport.run._replay writes it)
SPEC_FILE = "spec.yaml"  # the spec as run (flags applied): `passport run RUN/spec.yaml` runs it again
RAW_FILES = ("requests.parquet", "chunks.parquet", "telemetry.parquet", "schedule.parquet", "engine.log",
             "declared.json", "calibration.json", "canaries.parquet", "accuracy.parquet", PROBES_FILE, SPEC_FILE)
REPORT_FILES = ("report.md", "report.html")  # and plots/*.png


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def canonical_json(data: Any) -> bytes:
    """The one byte form a JSON value is hashed in: sorted keys, no spaces, UTF-8."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def content_sha256(passport: Mapping[str, Any]) -> str:
    """The hash a passport carries over its own canonical form (every field but this one and the
    signature of it)."""
    return sha256_bytes(canonical_json({k: v for k, v in passport.items() if k not in ("content_sha256", "signature")}))


def file_entries(folder: Path, reports: bool = False) -> dict[str, FileFacts]:
    """sha256, size and (for Parquet) row count of each raw file present in the run folder (the
    parts of a table a full disk kept from being joined, where the table is absent), and with
    `reports` of report.md, report.html and plots/*.png."""
    folder = Path(folder)
    names = []
    for name in RAW_FILES:
        parts = folder / name.replace(".parquet", ".parts")
        if name.endswith(".parquet") and not (folder / name).is_file() and parts.is_dir():
            names += [f"{parts.name}/{p.name}" for p in sorted(parts.glob("part-*.parquet"))]
        else:
            names.append(name)
    if reports:
        names += [*REPORT_FILES, *(f"plots/{p.name}" for p in sorted((folder / "plots").glob("*.png")))]
    entries: dict[str, FileFacts] = {}
    for name in names:
        path = folder / name
        if path.is_file():
            rows = _rows(path) if name.endswith(".parquet") else None
            entries[name] = FileFacts(sha256=sha256_file(path), bytes=path.stat().st_size, rows=rows)
    return entries


# The text columns, which no figure reads: left on disk when figures are computed (they are most
# of the bytes of a run with long prompts or answers).
TEXT_COLUMNS = {"requests": ("prompt", "response_text", "reasoning_text", "tool_calls"), "chunks": ("data", "event")}


class TamperedFileError(UntrustedRunError):
    """A file of a sealed run folder is not the one its passport lists: its bytes differ from the
    listed sha256, it is missing, a link, not a regular file, or present but not listed."""


class RunFiles:
    """A run folder's files, read as the module docstring says: unchecked (`listed` None) or each
    against `listed`, the passport's files table (path in the folder -> sha256). Each table is
    read once per reader (verify's raw-table checks and its re-derivation share them): a reader
    is for a finished folder, and does not see a table written after it read it."""

    def __init__(self, folder: Path | str, listed: Mapping[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self._listed = None if listed is None else dict(listed)
        self._tables: dict[tuple[str, bool], pa.Table | None] = {}

    @classmethod
    def of(cls, source: RunSource) -> RunFiles:
        """`source` itself when it is a RunFiles, else an unchecked reader of that folder."""
        return source if isinstance(source, RunFiles) else cls(Path(source))

    @property
    def checked(self) -> bool:
        return self._listed is not None

    def read(self, name: str, max_bytes: int | None = None) -> bytes | None:
        """The bytes of `name` (a path inside the folder), None when the folder has no such file;
        checked: the bytes whose sha256 is the listed one, else TamperedFileError. A file that is
        not a regular one (a FIFO, a device) is refused without blocking; one over `max_bytes`
        raises ValueError before it is read."""
        path = self.folder / name
        if self._listed is None:
            return _read_regular(path, max_bytes, follow=True) if path.is_file() else None
        refusal = not_inside(self.folder, name)
        if refusal is not None:
            raise TamperedFileError(f"{path}: {refusal}; a sealed run folder holds plain files only")
        expected = self._listed.get(name)
        if expected is None:
            if os.path.lexists(path):
                raise TamperedFileError(f"{path} is not in its passport's files table: it was added after the run "
                                        f"was sealed; `passport verify {self.folder}` lists every difference")
            return None
        try:
            data = _read_regular(path, max_bytes)
        except FileNotFoundError:
            raise TamperedFileError(f"{path} is listed in its passport but missing; `passport verify "
                                    f"{self.folder}` lists every difference") from None
        if sha256_bytes(data) != expected:
            raise TamperedFileError(f"{path} was changed after its passport was sealed (its sha256 differs from the "
                                    f"passport's files table); `passport verify {self.folder}` lists every "
                                    "difference")
        return data

    def text(self, name: str, max_bytes: int | None = None) -> str | None:
        """`read`, decoded as UTF-8 (undecodable bytes replaced)."""
        data = self.read(name, max_bytes)
        return None if data is None else data.decode("utf-8", errors="replace")

    def table(self, name: str, figures_only: bool = False) -> pa.Table | None:
        """`<name>.parquet`, or the parts of a killed run (`<name>.parts/`), or None if neither;
        with `figures_only`, without the text columns no figure reads (TEXT_COLUMNS)."""
        key = (name, figures_only)
        if key not in self._tables:
            self._tables[key] = self._read_table(name, figures_only)
        return self._tables[key]

    def _read_table(self, name: str, figures_only: bool) -> pa.Table | None:
        skip = TEXT_COLUMNS.get(name, ()) if figures_only else ()
        whole = f"{name}.parquet"
        if self._listed is None:
            path = self.folder / whole
            if path.is_file():
                return _read(path, skip)
            parts = sorted((self.folder / f"{name}.parts").glob("part-*.parquet"))
            return pa.concat_tables([_read(f, skip) for f in parts]) if parts else None
        if whole in self._listed or os.path.lexists(self.folder / whole):
            data = self.read(whole)
            return None if data is None else _read(self.folder / whole, skip, data)
        prefix = f"{name}.parts/"
        listed = sorted(n for n in self._listed if n.startswith(prefix))
        on_disk = sorted(f"{prefix}{p.name}" for p in (self.folder / f"{name}.parts").glob("part-*.parquet"))
        for extra in sorted(set(on_disk) - set(listed)):
            self.read(extra)  # refused by name: a part added after the run was sealed
        tables = [_read(self.folder / n, skip, data) for n in listed if (data := self.read(n)) is not None]
        return pa.concat_tables(tables) if tables else None


RunSource = Path | str | RunFiles  # a run folder (read unchecked) or a reader of one


def not_inside(run_dir: Path, name: str) -> str | None:
    """Why a files-table name is not a plain file inside the run folder, or None: the table may
    name only relative paths without `..`, and none of them a symbolic link (a reader would read,
    hash and so confirm a file outside the folder)."""
    path = Path(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name or "\x00" in name:
        return "not a plain path inside the run folder"
    here = run_dir
    for part in path.parts:
        here = here / part
        if here.is_symlink():
            return f"{here.relative_to(run_dir)} is a symbolic link"
    return None


def _read_regular(path: Path, max_bytes: int | None, follow: bool = False) -> bytes:
    """The bytes of a regular file of at most `max_bytes`, opened without blocking (a FIFO or
    device is refused, not waited on) and, unless `follow`, without following a final link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TamperedFileError(f"{path} is not a regular file; a run folder holds plain files only")
        if max_bytes is not None and info.st_size > max_bytes:
            raise ValueError(f"{path} is {info.st_size:,} bytes, over the {max_bytes:,} it may have")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def _rows(path: Path) -> int:
    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except (pa.ArrowException, OSError) as exc:
        raise RunFolderError(f"{path} is not a readable Parquet file (truncated or damaged?): {exc}") from exc


def _read(path: Path, skip: tuple[str, ...] = (), data: bytes | None = None) -> pa.Table:
    """The Parquet table at `path`, or in `data` (its bytes, already read and checked), without
    the columns in `skip`."""
    def source() -> Any:
        return path if data is None else pa.BufferReader(data)

    try:
        if skip:
            names = pq.read_schema(source()).names
            return pq.read_table(source(), columns=[n for n in names if n not in skip])
        return pq.read_table(source())
    except (pa.ArrowException, OSError) as exc:
        raise RunFolderError(f"{path} is not a readable Parquet file (truncated or damaged?): {exc}") from exc
