"""`passport campaign SPEC`: the arms of a campaign one after another on this machine, one
passport each, and the campaign record that ranks them (`passport.judge._campaign`).

Per arm, in order: the capacity arithmetic (an arm that does not fit is recorded and never
launched); then an ordinary run (or sweep, `mode: sweep`) of the arm's spec: launch or attach,
probe, canaries (a HOLD arm is recorded, never ranked), the timed phase, discards, its passport.
An arm whose engine does not start, or whose run raises, is recorded with the reason and the
campaign goes on; campaign.json and the reports are rewritten after every arm, so a campaign
killed halfway keeps every arm it finished. Ctrl-C (or SIGTERM) stops the campaign: the arm it
reached is recorded as its run ended, the arms after it are listed as not run, and the record
says it was interrupted.

    <out>/<name>-campaign-<UTC>-<id>/
        campaign.yaml        the campaign spec as written (secrets masked)
        campaign.json        one row per arm, ranked, sealed by a content hash
        report.md, report.html, plots/campaign.png
        arms/<name>-<arm>-<UTC>-<id>/   each arm's run folder (mode sweep: its sweep folder)
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import scrub, scrub_json, write_new
from passport.judge import (
    CAMPAIGN_FILE,
    SWEEP_FILE,
    ArmRow,
    Fit,
    campaign_record,
    check_fit,
    failed_arm,
    judged_at_knee,
    summarize_arm,
)
from passport.model import ArmSpec, CampaignSpec, RunSpec, arm_raw_spec, read_passport
from passport.report import campaign_blocks, write_reports
from passport.run._execute import execute
from passport.run._stages import ProgressFactory
from passport.run._sweep import run_sweep

__all__ = ["CampaignOutcome", "run_campaign", "CAMPAIGN_SPEC_FILE"]

CAMPAIGN_SPEC_FILE = "campaign.yaml"


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
               progress: ProgressFactory | None, say: Callable[[str], None]) -> ArmRow:
    """Run one arm and summarize it from its passport (mode sweep: its knee level's)."""
    raw = arm_raw_spec(campaign, arm)
    if campaign.mode == "run":
        result = execute(spec, raw, [], folder / "arms", progress=progress, status=say)
        row = summarize_arm(arm, str(result.folder.relative_to(folder)), result.passport, fit, campaign.objective)
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
    row = summarize_arm(arm, str(level_dir.relative_to(folder)), read_passport(level_dir), fit, campaign.objective)
    return judged_at_knee(row, json.loads((sweep.folder / SWEEP_FILE).read_text()))


def run_campaign(campaign: CampaignSpec, specs: dict[str, RunSpec], raw: dict[str, Any], out_root: Path,
                 progress: ProgressFactory | None = None,
                 status: Callable[[str], None] | None = None) -> CampaignOutcome:
    """Run every arm (see the module docstring) and write the campaign folder."""
    say = status or (lambda _msg: None)
    stamp = dt.datetime.now(dt.UTC)
    folder = Path(out_root) / f"{campaign.name}-campaign-{stamp.strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"
    (folder / "arms").mkdir(parents=True)
    write_new(folder / CAMPAIGN_SPEC_FILE, yaml.safe_dump(scrub_json(raw), sort_keys=False).encode())
    created = stamp.isoformat(timespec="seconds").replace("+00:00", "Z")
    rows: list[ArmRow] = []
    record = _write(folder, campaign, rows, created, interrupted=False)
    say(f"campaign folder: {folder}")
    try:
        for arm in campaign.arms:
            spec = specs[arm.name]
            varies = "; ".join(f"{k}: {v}" for k, v in arm.varies.items()) or "nothing declared"
            say(f"campaign arm {arm.name} (varies {varies})")
            fit = check_fit(arm, spec.load.concurrency)
            if fit is not None:
                say(f"arm {arm.name}: {fit.lines[-1]}")
            if fit is not None and not fit.fits:
                rows.append(failed_arm(arm, "does_not_fit", f"the capacity arithmetic: {fit.lines[-1]}", fit))
            else:
                try:
                    rows.append(_timed_arm(campaign, arm, spec, fit, folder, progress, say))
                except _Interrupted as stop:
                    rows.append(stop.row)
                    raise KeyboardInterrupt from None
                except KeyboardInterrupt:
                    rows.append(failed_arm(arm, "failed", "interrupted (Ctrl-C or SIGTERM)", fit))
                    raise
                except Exception as exc:  # the campaign goes on: an arm's failure is its result
                    reason = f"{type(exc).__name__}: {scrub(str(exc))}"
                    say(f"arm {arm.name} failed: {reason}")
                    rows.append(failed_arm(arm, "failed", reason, fit))
            record = _write(folder, campaign, rows, created, interrupted=False)
    except KeyboardInterrupt:
        record = _write(folder, campaign, rows, created, interrupted=True)
    return CampaignOutcome(folder, record)


def _write(folder: Path, campaign: CampaignSpec, rows: list[ArmRow], created: str, interrupted: bool) -> dict[str, Any]:
    record = campaign_record(campaign, CAMPAIGN_SPEC_FILE, rows, created, interrupted)
    write_new(folder / CAMPAIGN_FILE, (json.dumps(record, indent=2) + "\n").encode())
    write_reports(folder, f"Campaign: {campaign.name}", campaign_blocks(record))
    return record
