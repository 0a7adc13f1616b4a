"""The exit codes of every command, in one place (docs/concepts/design.md "The command line")."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


class ExitCode(IntEnum):
    """What a CI system gates on.

    OK: the run is VALID (verify: verified; gate: every condition met; canary: every case
    passed; compare: comparable). FAILED: INVALID, HOLD, INCOMPLETE or SATURATED (verify:
    differences found; gate: a condition failed; canary: a case failed; compare: not
    comparable). USAGE: a
    usage or input error (bad spec, unreadable run folder, unreachable endpoint, engine that would
    not start): nothing was measured. INTERNAL: the command failed unexpectedly (a defect in
    passport), or a run failed after its records began (signing, the reports, the ledger): the
    message says where the records are and how to finish (`passport recover`), and the traceback
    is in error.log.
    """

    OK = 0
    FAILED = 1
    USAGE = 2
    INTERNAL = 3

    @classmethod
    def of(cls, passed: bool) -> ExitCode:
        return cls.OK if passed else cls.FAILED

    @classmethod
    def of_verdict(cls, verdict: str) -> ExitCode:
        return cls.of(verdict == "VALID")
