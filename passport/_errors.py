"""Errors of the passport layer (spec, run folder, verification).

    PassportError            anything the CLI reports as a usage or input error (exit 2)
    +-- SpecError            the run spec is invalid; the message names each field and the fix
    +-- RunFolderError       a run folder or passport file cannot be read
    +-- OutputFolderError    the output folder cannot be written, or is clearly too small
"""

from __future__ import annotations

__all__ = ["PassportError", "SpecError", "RunFolderError", "OutputFolderError"]


class PassportError(Exception):
    """An input problem; the message says what is wrong and how to fix it."""


class SpecError(PassportError):
    """The run spec is invalid (unknown field, wrong type, missing value)."""


class RunFolderError(PassportError):
    """A run folder, or its passport.json, is missing, unreadable or of an unknown version."""


class OutputFolderError(PassportError):
    """The output folder cannot be created or written, or has clearly too little free space."""
