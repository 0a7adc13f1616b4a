"""The fault matrix, declared where it is proven.

`@fault(case, behaviour)` on a test names a fault a user can meet and what passport does about
it; `scripts/docs_reference.py` reads these decorators (without importing the tests) and writes
the documentation's page "Faults and hostile input" (docs/concepts/faults.md) at every build, so
the table is always the one the tests declare. A test may carry several.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["fault"]

Test = TypeVar("Test", bound=Callable[..., object])


def fault(case: str, behaviour: str) -> Callable[[Test], Test]:
    """Declare that the decorated test proves `behaviour` for `case`; the test itself is unchanged."""
    if not case or not behaviour:
        raise ValueError("a fault needs a case and a behaviour")

    def declare(test: Test) -> Test:
        return test

    return declare
