"""The one error root, and the errors of the passport layer (spec, run folder, verification).

Every package's errors derive from `PassportError`, so a library user (and the CLI, which
reports each as a usage or input error, exit 2) catches one class. This module imports
nothing: `workloads`, `harness` and `canaries` import it without loading anything else of
passport (`passport/__init__.py` loads its names on first use).

    PassportError            anything that stops a command; the message says what and how to fix it
    +-- SpecError            the run spec is invalid; the message names each field and the fix
    +-- RunFolderError       a run folder or passport file cannot be read
    +-- OutputFolderError    the output folder cannot be written, or is clearly too small
    +-- workloads.WorkloadError      the workload cannot be materialized (TokenizerError)
    +-- harness.HarnessError         the load cannot be sent (EndpointError, EngineLaunchError,
    |                                ScheduleError)
    +-- canaries.CanaryError         a canary suite cannot be loaded or run (SandboxUnavailable)

Per-request failures are data (outcome classes in requests.parquet), never exceptions.
"""

from __future__ import annotations

__all__ = ["PassportError", "SpecError", "RunFolderError", "OutputFolderError"]


class PassportError(Exception):
    """Anything that stops a command; the message says what is wrong and how to fix it."""


class SpecError(PassportError):
    """The run spec is invalid (unknown field, wrong type, missing value)."""


class RunFolderError(PassportError):
    """A run folder, or its passport.json, is missing, unreadable or of an unknown version."""


class OutputFolderError(PassportError):
    """The output folder cannot be created or written, or has clearly too little free space."""
