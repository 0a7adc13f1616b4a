"""`passport verify RUN_DIR`: recompute a passport's results and check every file's hash.

For auditors: it reads `passport.json` as plain JSON, checks the schema version and the sha256
of every raw file it lists, checks that the SLOs and discard rules in the protocol are those
frozen in declared.json before the first timed request, recomputes `results` from the raw files
with `compute_results` (numpy and pyarrow only; nothing from the load generator), and reports
each difference. An empty list means "verified".
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from passport._errors import RunFolderError
from passport.audit._declared import DECLARED_FILE
from passport.audit._files import sha256_file
from passport.audit._results import compute_results
from passport.audit._versions import SUPPORTED_SCHEMA_VERSIONS

__all__ = ["verify_run", "diff_values", "read_passport_json", "RESULTS_ADDED_IN_1_2"]

RESULTS_ADDED_IN_1_2 = ("lengths", "sessions", "checks", "shapes")


def _explanation(key: str) -> bool:
    """Free-text explanations (`reason`, `energy_reason`, ...) say why a figure is missing; their
    wording may change between harness versions, so they are not compared."""
    return key == "reason" or key.endswith("_reason")


def diff_values(expected: Any, actual: Any, path: str = "results") -> list[str]:
    """Differences between two JSON-like values; floats equal within 1e-9 relative; explanations
    are skipped."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual)):
            if _explanation(key):
                continue
            if key not in actual:
                if expected[key] is not None:
                    out.append(f"{path}.{key}: in the passport ({expected[key]!r}) but not recomputed")
            elif key not in expected:
                if actual[key] is not None:
                    out.append(f"{path}.{key}: recomputed as {actual[key]!r} but missing from the passport")
            else:
                out += diff_values(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} items in the passport, {len(actual)} recomputed"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in diff_values(e, a, f"{path}[{i}]")]
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)) and not isinstance(expected, bool):
        if math.isclose(float(expected), float(actual), rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif expected == actual:
        return []
    return [f"{path}: passport says {expected!r}, raw logs give {actual!r}"]


def _check_declarations(run_dir: Path, passport: dict[str, Any]) -> list[str]:
    """The passport's SLOs and discard rules must be those frozen in declared.json before the run."""
    effective = (passport.get("protocol") or {}).get("effective") or {}
    declared_info = (passport.get("protocol") or {}).get("declared")
    path = run_dir / DECLARED_FILE
    if not path.is_file():
        if effective.get("slo") or effective.get("discard"):
            return [f"the protocol declares SLOs or discard rules but {DECLARED_FILE} is missing: nothing shows "
                    "they were declared before the run, and results are recomputed without them"]
        return []
    problems = []
    if declared_info and sha256_file(path) != declared_info.get("sha256"):
        problems.append(f"{DECLARED_FILE}: sha256 differs from protocol.declared (the declarations were changed)")
    frozen = json.loads(path.read_text()).get("spec") or {}
    for key in ("slo", "discard"):
        if (effective.get(key) or None) != (frozen.get(key) or None):
            problems.append(f"protocol.effective.{key} is {effective.get(key)!r} but {DECLARED_FILE}, written before "
                            f"the first timed request, declares {frozen.get(key)!r}: rules added after the run "
                            "are not applied")
    return problems


def read_passport_json(path: Path) -> dict[str, Any]:
    """A passport.json (or a run folder's) as plain JSON; RunFolderError when there is none this
    version of passport reads (missing, not JSON, or of an unknown schema version)."""
    path = Path(path)
    if path.is_dir():
        path = path / "passport.json"
    try:
        passport = json.loads(path.read_text())
    except OSError as exc:
        raise RunFolderError(f"cannot read {path}: {exc.strerror}; give a run folder (results/<run>/)") from exc
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{path} is not valid JSON: {exc}") from exc
    version = passport.get("schema_version") if isinstance(passport, dict) else None
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise RunFolderError(f"{path}: passport schema_version {version!r} is not supported by this passport "
                             f"(knows {', '.join(SUPPORTED_SCHEMA_VERSIONS)}); upgrade passport")
    return dict(passport)


def verify_run(run_dir: Path) -> list[str]:
    """Every difference between the passport and what its raw files say (empty: verified).
    Raises RunFolderError when `run_dir` holds no passport this verifier can read."""
    run_dir = Path(run_dir)
    passport = read_passport_json(run_dir)
    problems: list[str] = []
    version = passport["schema_version"]
    for name, entry in passport.get("files", {}).items():
        file_path = run_dir / name
        if not file_path.is_file():
            problems.append(f"{name}: listed in the passport but missing")
        elif sha256_file(file_path) != entry["sha256"]:
            problems.append(f"{name}: sha256 differs from the passport (the file was changed)")
    problems += _check_declarations(run_dir, passport)
    try:
        recomputed = json.loads(json.dumps(compute_results(run_dir)))
    except (OSError, KeyError, ValueError) as exc:
        return problems + [f"cannot recompute results: {exc}"]
    if version in ("1.0", "1.1"):  # figures added in 1.2 were not part of these passports
        for key in RESULTS_ADDED_IN_1_2:
            recomputed.pop(key, None)
    problems += diff_values(passport.get("results", {}), recomputed)
    return problems
