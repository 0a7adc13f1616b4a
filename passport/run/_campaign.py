"""`passport campaign SPEC`: every arm of a campaign `repetitions` times on this machine, in
rounds whose order rotates, one passport per repetition, and the campaign record that ranks
them (`passport.judge._campaign`).

Round r runs the arms starting r - 1 places further along the declared order (A B C, then B C
A, ...), so the machine's drift and the order fall on every arm alike. Per arm and round: the
capacity arithmetic (an arm that does not fit is recorded once and never launched); then an
ordinary run (or sweep, `mode: sweep`) of the arm's spec: probe, canaries (a HOLD arm is
recorded and not run again), the timed phase, discards, its passport. With `relaunch: once` each
arm's engine is launched on its first turn and kept up until the campaign ends (one that exited
is started again on its next turn, and the status line says so); with `per_round` every run
launches its own. An arm is ranked only when every repetition is VALID, so one that cannot be
(its engine did not start, its run raised, it did not fit, its canaries held it, a repetition was
INVALID or INCOMPLETE, its model differed undeclared) is recorded with the reason and not run
again; the campaign goes on.
campaign.json and the reports are rewritten after every turn, so a campaign killed halfway keeps
every repetition it finished. Ctrl-C (or SIGTERM) stops the campaign: the turn it reached is
recorded as its run ended, the turns after it are listed as not run, and the record says it was
interrupted.

`--resume FOLDER` continues such a campaign in its folder: the spec must be the one it ran
(sha256 of the mapping as written), every recorded repetition's passport must still have the
content hash the record holds and pass the door (`passport.audit.open_run`: signed by this
machine's or the team's signing key, or a --key given, every file it lists unchanged), a
repetition cut short by the interruption is run again, and every turn not yet recorded runs.
A campaign holds a lock on its folder while it runs (`.campaign.lock`, flock: released when the
process ends, however it ends), so a second resume of the same folder is refused at once instead
of running the same turns and overwriting the record.

    <out>/<name>-campaign-<UTC>-<id>/
        campaign.yaml        the campaign spec as written (secrets masked)
        campaign.json        one summary per arm (its repetitions inside), ranked, sealed by a content hash
        report.md, report.html, plots/campaign.png
        engines/<arm>.log    each engine's log (relaunch: once)
        arms/<name>-<arm>-<UTC>-<id>/   each repetition's run folder (mode sweep: its sweep folder)
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import EngineLauncher, scrub, scrub_file, scrub_json, write_new
from passport._errors import RunFolderError
from passport.audit import Trust, open_run, signing_fingerprint
from passport.judge import (
    CAMPAIGN_FILE,
    SWEEP_FILE,
    ArmRow,
    Fit,
    Progress,
    campaign_record,
    check_fit,
    failed_arm,
    judged_at_knee,
    read_campaign,
    recorded_rows,
    spec_digest,
    summarize_arm,
    summarize_arms,
    turns,
)
from passport.model import ArmSpec, CampaignSpec, RunSpec, arm_raw_spec, read_passport
from passport.report import campaign_blocks, write_reports
from passport.run._endpoint import engine_launcher
from passport.run._execute import execute
from passport.run._stages import ProgressFactory
from passport.run._sweep import run_sweep

__all__ = ["CampaignOutcome", "run_campaign", "resume_campaign", "CAMPAIGN_SPEC_FILE"]

CAMPAIGN_SPEC_FILE = "campaign.yaml"
LOCK_FILE = ".campaign.lock"


@dataclass(frozen=True)
class CampaignOutcome:
    folder: Path
    record: dict[str, Any]


class _Interrupted(Exception):
    """Ctrl-C or SIGTERM reached an arm's timed phase, which wrote its passport and returned:
    the campaign records the arm and runs no other."""

    def __init__(self, row: ArmRow) -> None:
        super().__init__(row.reason)
        self.row = row


def _timed_arm(campaign: CampaignSpec, arm: ArmSpec, spec: RunSpec, fit: Fit | None, folder: Path,
               launcher: EngineLauncher | None, progress: ProgressFactory | None,
               say: Callable[[str], None]) -> ArmRow:
    """Run one repetition of one arm and summarize it from its passport (mode sweep: its knee
    level's)."""
    raw = arm_raw_spec(campaign, arm)
    if campaign.mode == "run":
        result = execute(spec, raw, [], folder / "arms", progress=progress, status=say, shared_engine=launcher)
        row = summarize_arm(arm, str(result.folder.relative_to(folder)), result.passport, fit, campaign.objective,
                          campaign.min_accuracy)
        if result.interrupts or (result.passport.validity.incomplete_reason or "").startswith("interrupted"):
            raise _Interrupted(row)
        return row
    sweep = run_sweep(spec, raw, [], folder / "arms", progress=progress, status=say)
    by_load = {lv.load: lv for lv in sweep.levels}
    chosen = by_load.get(sweep.knee) if sweep.knee is not None else None
    if chosen is None:
        if not sweep.levels:
            return failed_arm(arm, "failed", f"the sweep ran no level ({sweep.stop_reason})", fit)
        chosen = sweep.levels[0]
    level_dir = sweep.folder / "levels" / chosen.run
    row = summarize_arm(arm, str(level_dir.relative_to(folder)), read_passport(level_dir), fit, campaign.objective,
                          campaign.min_accuracy)
    return judged_at_knee(row, json.loads((sweep.folder / SWEEP_FILE).read_text()))


def _cut(row: ArmRow) -> bool:
    """A repetition cut short by Ctrl-C or SIGTERM: recorded as it ended, run again on resume."""
    return (row.reason or "").startswith("interrupted")


@dataclass
class _Campaign:
    """A campaign folder being written: its spec, its repetitions so far, where it stands."""

    campaign: CampaignSpec
    specs: dict[str, RunSpec]
    folder: Path
    created: str
    digest: str
    rows: list[ArmRow] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)
    launchers: dict[str, EngineLauncher] = field(default_factory=dict)

    def done(self, arm: str, round_: int) -> bool:
        return any(r.name == arm and r.round == round_ and not _cut(r) for r in self.rows)

    def unrankable(self) -> set[str]:
        """The arms that can no longer be ranked (a repetition ended otherwise, or its model or
        precision broke an invariant), so are not run again."""
        rows = [r for r in self.rows if not _cut(r)]
        return {a.name for a in summarize_arms(rows, self.campaign)[0] if a.status != "ranked"} if rows else set()

    def not_run(self) -> list[str]:
        stopped = self.unrankable()
        return [f"{arm.name} round {r}" for r, arm in turns(self.campaign)
                if not self.done(arm.name, r) and arm.name not in stopped]

    def write(self, interrupted: bool) -> dict[str, Any]:
        record = campaign_record(self.campaign, CAMPAIGN_SPEC_FILE, self.digest, self.rows, self.created,
                                 Progress(interrupted, self.not_run() if interrupted else [], self.resumed))
        write_new(self.folder / CAMPAIGN_FILE, (json.dumps(record, indent=2) + "\n").encode())
        write_reports(self.folder, f"Campaign: {self.campaign.name}", campaign_blocks(record))
        return record

    def launcher(self, arm: ArmSpec, say: Callable[[str], None]) -> EngineLauncher | None:
        """relaunch: once: the arm's engine, started on its first turn (again if it exited)."""
        if self.campaign.relaunch != "once" or arm.engine is None:
            return None
        launcher = self.launchers.get(arm.name)
        if launcher is not None and launcher.alive():
            return launcher
        if launcher is not None:
            say(f"arm {arm.name}: its engine exited (code {launcher.returncode}) in an earlier round; starting "
                "it again")
        launcher = engine_launcher(self.specs[arm.name], self.folder / "engines" / f"{arm.name}.log")
        self.launchers[arm.name] = launcher
        say(f"arm {arm.name}: starting its engine once for every round: {' '.join(launcher.command)}")
        launcher.start()
        return launcher

    def stop_engines(self) -> None:
        for launcher in self.launchers.values():
            launcher.stop()
            scrub_file(launcher.log_path)

    def turn(self, round_: int, arm: ArmSpec, progress: ProgressFactory | None, say: Callable[[str], None]) -> None:
        spec = self.specs[arm.name]
        varies = "; ".join(f"{k}: {v}" for k, v in arm.varies.items()) or "nothing declared"
        say(f"round {round_} of {self.campaign.repetitions}: arm {arm.name} (varies {varies})")
        fit = check_fit(arm, spec.load.concurrency)
        if fit is not None:
            say(f"arm {arm.name}: {fit.lines[-1]}")
        if fit is not None and not fit.fits:
            row = failed_arm(arm, "does_not_fit", f"the capacity arithmetic: {fit.lines[-1]}", fit)
        else:
            try:
                row = _timed_arm(self.campaign, arm, spec, fit, self.folder, self.launcher(arm, say), progress, say)
            except _Interrupted as stop:
                stop.row.round = round_
                self.rows.append(stop.row)
                raise KeyboardInterrupt from None
            except KeyboardInterrupt:
                row = failed_arm(arm, "failed", "interrupted (Ctrl-C or SIGTERM)", fit)
                row.round = round_
                self.rows.append(row)
                raise
            except Exception as exc:  # the campaign goes on: an arm's failure is its result
                reason = f"{type(exc).__name__}: {scrub(str(exc))}"
                say(f"arm {arm.name} failed: {reason}")
                row = failed_arm(arm, "failed", reason, fit)
        row.round = round_
        self.rows.append(row)


def _run_turns(state: _Campaign, progress: ProgressFactory | None, say: Callable[[str], None]) -> dict[str, Any]:
    record = state.write(interrupted=False)
    try:
        for round_, arm in turns(state.campaign):
            if state.done(arm.name, round_) or arm.name in state.unrankable():
                continue
            state.turn(round_, arm, progress, say)
            record = state.write(interrupted=False)
    except KeyboardInterrupt:
        record = state.write(interrupted=True)
    finally:
        state.stop_engines()
    return record


def run_campaign(campaign: CampaignSpec, specs: dict[str, RunSpec], raw: dict[str, Any], out_root: Path,
                 progress: ProgressFactory | None = None,
                 status: Callable[[str], None] | None = None) -> CampaignOutcome:
    """Run every arm in every round (see the module docstring) and write the campaign folder."""
    say = status or (lambda _msg: None)
    stamp = dt.datetime.now(dt.UTC)
    folder = Path(out_root) / f"{campaign.name}-campaign-{stamp.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"
    (folder / "arms").mkdir(parents=True)
    masked = scrub_json(raw)
    write_new(folder / CAMPAIGN_SPEC_FILE, yaml.safe_dump(masked, sort_keys=False).encode())
    state = _Campaign(campaign, specs, folder, _utc(stamp), spec_digest(masked))
    say(f"campaign folder: {folder}")
    with _locked(folder):
        return CampaignOutcome(folder, _run_turns(state, progress, say))


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold the campaign folder's lock (see the module docstring); RunFolderError when another
    process holds it."""
    import fcntl

    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise RunFolderError(f"cannot lock {folder} ({path}: {exc.strerror or exc}); give a campaign folder this "
                             "user can write") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise RunFolderError(f"{folder} is being run by another passport ({holder}): wait for it to finish, or "
                                 "stop it, then resume") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def resume_campaign(campaign: CampaignSpec, specs: dict[str, RunSpec], raw: dict[str, Any], folder: Path,
                    progress: ProgressFactory | None = None, status: Callable[[str], None] | None = None,
                    keys: tuple[str, ...] = ()) -> CampaignOutcome:
    """Continue the campaign in `folder` (see the module docstring); RunFolderError when the
    spec is not the one it ran, another process is running it, or a recorded repetition's
    passport or files changed or are not signed by one of `keys` (none given: this process's
    signing key)."""
    with _locked(folder):
        return _resume(campaign, specs, raw, Path(folder), progress, status, keys)


def _resume(campaign: CampaignSpec, specs: dict[str, RunSpec], raw: dict[str, Any], folder: Path,
            progress: ProgressFactory | None, status: Callable[[str], None] | None,
            keys: tuple[str, ...]) -> CampaignOutcome:
    say = status or (lambda _msg: None)
    recorded = read_campaign(folder)
    digest = spec_digest(scrub_json(raw))
    if recorded["spec_sha256"] != digest:
        raise RunFolderError(f"{folder} ran another campaign spec (sha256 {recorded['spec_sha256'][:12]}..., this one "
                             f"{digest[:12]}...): resume it with the spec it ran, {folder / CAMPAIGN_SPEC_FILE}")
    rows, problems = recorded_rows(folder, recorded, campaign, specs)
    kept = [r for r in rows if not _cut(r)]
    trust = Trust(keys or (signing_fingerprint(),))
    for row in kept if not problems else []:
        if row.run is not None:
            try:
                open_run(folder / row.run, trust)
            except RunFolderError as exc:
                problems.append(f"arm {row.name} round {row.round}: {exc}")
    if problems:
        raise RunFolderError(f"cannot resume {folder}: " + "; ".join(problems))
    state = _Campaign(campaign, specs, Path(folder), recorded["created_utc"], digest, kept,
                      [*recorded["resumed_utc"], _utc(dt.datetime.now(dt.UTC))])
    say(f"resuming {folder}: {len(kept)} repetition(s) kept, {len(state.not_run())} turn(s) to run")
    return CampaignOutcome(Path(folder), _run_turns(state, progress, say))


def _utc(stamp: dt.datetime) -> str:
    return stamp.isoformat(timespec="seconds").replace("+00:00", "Z")
