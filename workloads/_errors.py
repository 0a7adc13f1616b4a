"""Errors raised while declaring or materializing a workload.

    WorkloadError            any problem with what is to be offered
    +-- TokenizerError       the declared tokenizer cannot be loaded
"""

from __future__ import annotations

__all__ = ["WorkloadError", "TokenizerError"]


class WorkloadError(Exception):
    """The workload cannot be materialized as declared; the message says how to fix it."""


class TokenizerError(WorkloadError):
    """The declared tokenizer could not be found or loaded offline."""
