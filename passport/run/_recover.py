"""`passport recover RUN_DIR`: the passport of a run that was killed before it wrote one.

A run writes passport.draft.json (identity and protocol) before its timed phase, and its raw
tables stream into `<name>.parts/` folders of Parquet parts as requests finish. After a SIGKILL,
an out-of-memory kill or a power cut, those survive: `recover` joins the parts into the usual
tables (every recorded row kept; a run sent by worker processes: their shards merged, as the run
would have), derives everything else exactly as a finished run does, marks the passport
INCOMPLETE with the reason, and writes the reports. A run that ended its timed phase and then
failed (signing, the reports, a defect) recorded how timing ended in its draft: its passport keeps
the verdict it would have had. `validity.recovered` says how either was written. `verify`, `gate`
and `compare` then work on the folder like on any other.
"""

from __future__ import annotations

from pathlib import Path

from passport._errors import RunFolderError
from passport.audit import RunFiles, RunState
from passport.model import Passport, PassportDraft
from passport.run._assemble import DRAFT_FILE, finalize, write_passport
from passport.run._plan import utc_now
from passport.run._shards import join_leftover_parts, merge_shards, shard_numbers

__all__ = ["recover"]



def recover(run_dir: Path) -> Passport:
    """Write the passport of a killed run (see the module docstring); RunFolderError when the
    folder already has one or never reached its timed phase."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise RunFolderError(f"{folder} is not a run folder")
    if (folder / "passport.json").is_file():
        raise RunFolderError(f"{folder} already has its passport.json: nothing to recover (passport verify "
                             "checks it)")
    draft_path = folder / DRAFT_FILE
    if not draft_path.is_file():
        raise RunFolderError(f"{folder} has no {DRAFT_FILE}: the run stopped before its timed phase, so nothing was "
                             "measured and there is nothing to recover")
    try:
        draft = PassportDraft.model_validate_json(draft_path.read_bytes())
    except (ValueError, OSError) as exc:  # pydantic's ValidationError is a ValueError
        raise RunFolderError(f"{draft_path} cannot be read as a passport draft ({str(exc).splitlines()[0]}): "
                             "it was written by passport before the timed phase and must not be edited") from None
    parts = join_leftover_parts(folder)
    shards = shard_numbers(folder)
    if shards:  # a run sent by worker processes: their shards hold the requests
        parts += len(shards)
        merge_shards(folder, shards[-1] + 1)
    requests = RunFiles(folder).table("requests")
    kept = 0 if requests is None else requests.num_rows
    recovered_utc = utc_now()
    how = f"recovered at {recovered_utc} by `passport recover` from {parts} parts folder(s), {kept} request(s) kept"
    end = draft.timing_end
    if end is not None:  # the timed phase ended and said how: the run's own verdict stands
        state = RunState(complete=end.complete, incomplete_reason=end.incomplete_reason, forced=draft.forced,
                         launched_engine=draft.launched_engine)
        recovered = (f"the run ended its timed phase at {end.finished_utc} and stopped before writing its passport; "
                     f"{how}")
        return write_passport(folder, finalize(folder, draft, state, end.finished_utc, recovered))
    state = RunState(complete=False, forced=draft.forced, launched_engine=draft.launched_engine,
                     incomplete_reason=f"the run stopped before writing its passport (killed?); {how}")
    recovered = f"the run stopped during its timed phase; {how}"
    return write_passport(folder, finalize(folder, draft, state, recovered_utc, recovered))
