"""Errors raised while declaring or materializing a workload.

    WorkloadError            any problem with what is to be offered (a passport._errors.PassportError)
    +-- TokenizerError       the declared tokenizer cannot be loaded
"""

from __future__ import annotations

from passport._errors import PassportError

__all__ = ["WorkloadError", "TokenizerError"]


class WorkloadError(PassportError):
    """The workload cannot be materialized as declared; the message says how to fix it."""


class TokenizerError(WorkloadError):
    """The declared tokenizer could not be found or loaded offline."""
