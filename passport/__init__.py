"""WHAT IT MEANS: the passport and everything around it, in one sub-package per role.

    passport.cli     the command line: parser, one module per command, ExitCode
    passport.run     running a benchmark: open -> identify -> plan -> canaries -> timed -> assemble
    passport.audit   the auditor's arithmetic: metrics, results, declarations, validity, verify
                     (numpy and pyarrow only)
    passport.judge   decisions over passports: compare, gate, sweep knee/saturation, campaigns
    passport.plan    the arithmetic before a measurement: capacity, fit, a month's cost
    passport.report  report.md / report.html, plots, headline lines, JUnit XML
    passport.model   the spec and the passport as pydantic models, the JSON Schema

The names below are loaded when first used, so `import passport.audit` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from passport._lazy import lazy_names

if TYPE_CHECKING:
    from passport._errors import (
        MissingModuleError,
        OutputFolderError,
        PassportError,
        RunFolderError,
        SpecError,
        StageFailure,
        UntrustedRunError,
    )
    from passport._verify import Verification, verify
    from passport.audit import OpenRun, Trust, open_run
    from passport.model import SCHEMA_VERSION, Passport, RunSpec, load_spec, parse_spec, read_passport
    from passport.run import RunOutcome, execute

__all__ = [
    "Passport",
    "PassportError",
    "MissingModuleError",
    "StageFailure",
    "RunFolderError",
    "UntrustedRunError",
    "OutputFolderError",
    "OpenRun",
    "Trust",
    "open_run",
    "RunOutcome",
    "RunSpec",
    "SCHEMA_VERSION",
    "SpecError",
    "execute",
    "load_spec",
    "parse_spec",
    "read_passport",
    "verify",
    "Verification",
]

_HOME = {
    "PassportError": "passport._errors", "RunFolderError": "passport._errors",
    "OutputFolderError": "passport._errors", "SpecError": "passport._errors",
    "MissingModuleError": "passport._errors", "StageFailure": "passport._errors",
    "UntrustedRunError": "passport._errors", "open_run": "passport.audit", "Trust": "passport.audit",
    "OpenRun": "passport.audit",
    "SCHEMA_VERSION": "passport.model", "Passport": "passport.model", "RunSpec": "passport.model",
    "load_spec": "passport.model", "parse_spec": "passport.model", "read_passport": "passport.model",
    "RunOutcome": "passport.run", "execute": "passport.run",
    "verify": "passport._verify", "Verification": "passport._verify",
}


if not TYPE_CHECKING:  # for the type checker every name is imported above; unknown ones are errors
    __getattr__, __dir__ = lazy_names(__name__, _HOME)
