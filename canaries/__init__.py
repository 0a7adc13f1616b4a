"""Correctness canaries: cases run through the harness before any timing.

Not built yet (issue 4). Until then a run declares `canaries: none` or `default`; both are
recorded in the passport's validity section as "not run", never as passed.
"""

__all__: list[str] = []
