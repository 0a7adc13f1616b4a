"""The one error root, and the errors of the passport layer (spec, run folder, verification).

Every package's errors derive from `PassportError`, so a library user (and the CLI, which
reports each as a usage or input error, exit 2) catches one class. This module imports
nothing: `workloads`, `harness` and `canaries` import it without loading anything else of
passport (`passport/__init__.py` loads its names on first use).

    PassportError            anything that stops a command; the message says what and how to fix it
    +-- SpecError            the run spec is invalid; the message names each field and the fix
    +-- RunFolderError       a run folder or passport file cannot be read
    |   +-- UntrustedRunError    it can, but is not one to act on (edited, unsigned, a file changed)
    +-- OutputFolderError    the output folder cannot be written, or is clearly too small
    +-- MissingModuleError   a feature needs an optional module (a named extra) that is not installed
    +-- SigningKeyError      the signing key cannot be read or made (checked before a run sends anything)
    +-- workloads.WorkloadError      the workload cannot be materialized (TokenizerError)
    +-- harness.HarnessError         the load cannot be sent (EndpointError, EngineLaunchError,
    |                                ScheduleError)
    +-- canaries.CanaryError         a canary suite cannot be loaded or run (SandboxUnavailable)

Per-request failures are data (outcome classes in requests.parquet), never exceptions.

`StageFailure` is not a `PassportError`: it carries a defect (an exception nobody planned for)
out of one stage of a run, with where the run's records are, so the CLI can say what failed,
where the data is and how to finish the passport (`passport recover`), exit 3.
"""

from __future__ import annotations

__all__ = ["PassportError", "SpecError", "RunFolderError", "UntrustedRunError", "OutputFolderError",
           "MissingModuleError", "SigningKeyError", "StageFailure"]


class PassportError(Exception):
    """Anything that stops a command; the message says what is wrong and how to fix it."""


class SpecError(PassportError):
    """The run spec is invalid (unknown field, wrong type, missing value)."""


class RunFolderError(PassportError):
    """A run folder, or its passport.json, is missing, unreadable or of an unknown version."""


class UntrustedRunError(RunFolderError):
    """A run or campaign folder a command will not act on: its passport was edited, downgraded,
    is unsigned or signed by a key not trusted, or a file it lists was changed; the message names
    what and how to see every check (`passport verify`)."""


class OutputFolderError(PassportError):
    """The output folder cannot be created or written, or has clearly too little free space."""


class MissingModuleError(PassportError):
    """A feature the spec or command asks for needs a module of an optional extra that is not
    installed; the message names the `pip install 'passport[extra]'` that brings it."""


class SigningKeyError(PassportError):
    """PASSPORT_SIGNING_KEY, or this machine's key file or its folder, cannot give a signing key."""


class StageFailure(Exception):
    """An unexpected error in stage `stage` of a run whose folder is `folder` (None before it
    exists); the error itself is `cause` (and `__cause__`). What can still be done follows from the
    folder: with passport.json the passport is written; with passport.draft.json alone the run
    reached its timed phase and `passport recover FOLDER` finishes its passport from what was
    recorded. A `PassportError` after the timed phase is carried the same way, so its message can
    name the recover command too."""

    def __init__(self, stage: str, folder: str | None, cause: BaseException) -> None:
        super().__init__(f"{stage}: {type(cause).__name__}: {cause}")
        self.stage = stage
        self.folder = folder
        self.cause = cause
