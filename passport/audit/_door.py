"""The one door into a run folder: how every command that acts on a run (gate, compare, show,
export, ledger add, a campaign's arms, a resumed campaign's kept repetitions) opens it.

`open_run(folder, trust)` reads passport.json once and refuses the folder (`UntrustedRunError`,
a usage error, exit 2), naming every reason, when:
- its content hash is missing (schema 1.3 on) or differs from its content;
- its schema or rules version is lower than its own records imply (a downgrade,
  `passport.audit._versions.downgrade_problem`);
- it is unsigned and `trust.allow_unsigned` does not say the user knows it is an old one (schema
  1.3 and earlier were never signed), or its signature does not check, or it is signed by none of
  `trust.keys` when keys are given (`--key`, and PASSPORT_TRUSTED_KEYS so CI sets them once);
- the verdict re-derived from the raw files is not the passport's.
The raw files are read through a checked `RunFiles`: each read hashes the bytes it read against
the passport's files table and parses those same bytes, so an edited, added, swapped or linked
raw file is refused by name the moment anything reads it, and a command acting on an opened run
reads nothing the signature does not cover. What it costs: the files a command reads are read
and hashed once more than before (sha256 runs at about 1 GB/s).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from passport._errors import RunFolderError, UntrustedRunError
from passport.audit._derive import Derived, derive
from passport.audit._files import RunFiles, content_sha256
from passport.audit._verify import read_passport_json, run_state, signature_problems, verdict_problems
from passport.audit._versions import DERIVED_VALIDITY_SINCE, downgrade_problem, version_tuple

__all__ = ["TRUSTED_KEYS_ENV", "Trust", "OpenRun", "UntrustedRunError", "open_run", "seal_problems"]

TRUSTED_KEYS_ENV = "PASSPORT_TRUSTED_KEYS"
_FINGERPRINT = re.compile(r"sha256:[0-9a-f]{32}")


@dataclass(frozen=True)
class Trust:
    """What a command accepts: passports signed by any of `keys` (none: any valid signature), and
    unsigned ones only with `allow_unsigned`."""

    keys: tuple[str, ...] = ()
    allow_unsigned: bool = False

    @classmethod
    def of(cls, keys: Iterable[str] = (), allow_unsigned: bool = False,
           environ: Mapping[str, str] | None = None) -> Trust:
        """The `--key` fingerprints given, with those in PASSPORT_TRUSTED_KEYS (separated by
        commas or spaces); RunFolderError naming one that is not a fingerprint."""
        env = (os.environ if environ is None else environ).get(TRUSTED_KEYS_ENV, "")
        found: list[str] = []
        for key, where in [*((k, "--key") for k in keys), *((k, TRUSTED_KEYS_ENV) for k in re.split(r"[\s,]+", env))]:
            key = key.strip()
            if not key:
                continue
            if not _FINGERPRINT.fullmatch(key):
                raise RunFolderError(f"{where} {key!r} is not a key fingerprint; give one as a passport's "
                                     "signature.fingerprint shows it (sha256: and 32 hex digits)")
            if key not in found:
                found.append(key)
        return cls(tuple(found), allow_unsigned)


@dataclass(frozen=True)
class OpenRun:
    """A run folder that passed the door: its passport as read (`data`), a checked reader of its
    files, what was re-derived from them (the raw tables included), and who signed it (None: an
    unsigned passport the trust allowed)."""

    folder: Path
    data: dict[str, Any]
    files: RunFiles
    derived: Derived
    signer: str | None


def seal_problems(passport: dict[str, Any], trust: Trust) -> list[str]:
    """What is wrong with a passport's seal for `trust`: its content hash, a downgrade, its
    signature (an unsigned one is a problem unless allowed)."""
    problems = []
    if version_tuple(str(passport["schema_version"])) >= version_tuple(DERIVED_VALIDITY_SINCE) \
            and passport.get("content_sha256") != content_sha256(passport):
        problems.append("its content hash is missing or differs from its content (edited after it was written)")
    downgrade = downgrade_problem(passport)
    if downgrade is not None:
        problems.append(downgrade)
    if not passport.get("signature") and not trust.allow_unsigned:
        problems.append(f"it is unsigned (schema {passport['schema_version']}): pass --allow-unsigned to act on a "
                        "passport written before passports were signed")
    problems += [p.removeprefix("passport.json: ") for p in signature_problems(passport, trust.keys)]
    return list(dict.fromkeys(problems))


def open_run(folder: Path | str, trust: Trust) -> OpenRun:
    """The run at `folder`, through the door (see the module docstring); UntrustedRunError naming
    what it found, RunFolderError when there is no passport this version reads."""
    folder = Path(folder)
    passport = read_passport_json(folder)
    problems = seal_problems(passport, trust)
    listed = passport.get("files") or {}
    files = RunFiles(folder, {str(name): str(entry.get("sha256")) for name, entry in listed.items()
                              if isinstance(entry, Mapping)})
    derived = None
    if not problems:
        try:
            derived = derive(files, passport["protocol"], run_state(passport))
            problems += verdict_problems(passport, derived.verdict)
        except UntrustedRunError:
            raise
        except RunFolderError as exc:
            problems.append(str(exc))
        except (OSError, KeyError, ValueError, TypeError) as exc:
            problems.append(f"its verdict cannot be re-derived from the raw files: {exc}")
    if problems or derived is None:
        raise UntrustedRunError(f"{folder}: not a passport to act on: {'; '.join(problems)}; `passport verify "
                                f"{folder}` lists every check")
    signer = (passport.get("signature") or {}).get("fingerprint")
    return OpenRun(folder, passport, files, derived, signer)
