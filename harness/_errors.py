"""Errors that stop a run (per-request failures are data, never exceptions).

    HarnessError              anything that prevents sending the load (a passport._errors.PassportError)
    +-- EndpointError         the endpoint is malformed, unreachable or not OpenAI-compatible
    +-- EngineLaunchError     the declared engine failed to start or died
    +-- ScheduleError         the load cannot be scheduled as declared
"""

from __future__ import annotations

from passport._errors import PassportError

__all__ = ["HarnessError", "EndpointError", "EngineLaunchError", "ScheduleError"]


class HarnessError(PassportError):
    """The load could not be sent; the message says what and how to fix it."""


class EndpointError(HarnessError):
    """The endpoint is malformed, unreachable, or does not answer like an OpenAI API."""


class EngineLaunchError(HarnessError):
    """The engine declared in `engine.launch` did not start, or stopped while needed."""


class ScheduleError(HarnessError):
    """The declared load pattern cannot produce a schedule."""
