"""`verify(folder)`: a run folder or a campaign folder checked end to end, as `passport verify`
does, for library users (the CLI only prints what this returns).

A run: its content hash, the sha256 of every file it lists, the declarations frozen before the
run, the results, counts, canaries, every validity rule and the verdict recomputed from the raw
files (`passport.audit.verify_run`), then (schema 1.3 on) the reports re-rendered and the
identity replayed from the recorded probes, and the signature checked against `keys` when
given. A campaign: its campaign.json recomputed from its spec and its arms' passports, and every
arm's run verified as a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from passport.audit import verify_run
from passport.judge import CAMPAIGN_FILE, read_campaign, recompute_campaign
from passport.model import passport_model, read_passport_json
from passport.report import check_reports
from passport.run import replay_identity

__all__ = ["Verification", "verify"]

_CAMPAIGN_CHECKS = ["campaign content hash", "spec hash", "repetitions from the arms' passports",
                    "capacity arithmetic", "intervals, comparisons, groups and best", "advice"]


@dataclass(frozen=True)
class Verification:
    """What verify found: each difference (`problems`, empty when verified), what it checked,
    notes that are not differences (e.g. plots not compared under another matplotlib), and the
    run folders whose passport is unsigned (`unsigned`: schema 1.3 and earlier; verified, but
    nothing says whose run it was, so gate, compare, show, export and ledger add refuse them
    without --allow-unsigned)."""

    folder: Path
    campaign: bool
    problems: list[str]
    checked: list[str]
    notes: list[str]
    unsigned: list[Path]

    @property
    def verified(self) -> bool:
        return not self.problems


def verify(folder: Path, keys: tuple[str, ...] = ()) -> Verification:
    """Verify a run or campaign folder (see the module docstring). `keys`: fingerprints of the
    signing keys to trust (any of them); none: any valid signature. A folder that holds no
    passport this version reads raises RunFolderError."""
    folder = Path(folder)
    if (folder / CAMPAIGN_FILE).is_file():
        return Verification(folder, True, *_campaign(folder, keys))
    return Verification(folder, False, *_run(folder, keys))


def _run(run_dir: Path, keys: tuple[str, ...]) -> tuple[list[str], list[str], list[str], list[Path]]:
    verification = verify_run(run_dir, keys)
    problems, checked = list(verification.problems), list(verification.checked)
    notes: list[str] = []
    unsigned = [] if verification.signed else [run_dir]
    if not any(p.startswith("passport.json: content_sha256") for p in problems):
        passport = passport_model(read_passport_json(run_dir), run_dir)
        if passport.content_sha256 is not None:
            checked += ["reports", "identity (recorded probes)"]
            report_problems, notes = check_reports(passport, run_dir)
            problems += report_problems + replay_identity(passport, run_dir)
    return problems, checked, notes, unsigned


def _campaign(folder: Path, keys: tuple[str, ...]) -> tuple[list[str], list[str], list[str], list[Path]]:
    record = read_campaign(folder)
    problems = recompute_campaign(folder, record)
    checked = list(_CAMPAIGN_CHECKS)
    notes: list[str] = []
    unsigned: list[Path] = []
    for arm in record["arms"]:
        runs = [r for r in arm["repetitions"] if r["run"] is not None]
        for row in runs:
            label = f"arm {arm['name']} round {row['round']}"
            arm_problems, _, arm_notes, arm_unsigned = _run(folder / row["run"], keys)
            unsigned += arm_unsigned
            problems += [f"{label}: {p}" for p in arm_problems]
            notes += [f"{label}: {n}" for n in arm_notes]
        if runs:
            checked.append(f"arm {arm['name']} ({len(runs)} run{'s' if len(runs) != 1 else ''})")
    return problems, checked, notes, unsigned
