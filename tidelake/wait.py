"""Poll until a condition holds, or fail naming what was awaited.

Callers that wait on another thread or process pass `check`, which re-raises that worker's
failure at once instead of letting the wait run into its deadline.
Owner: the test kit (demos, nemesis).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from tidelake.errors import TidelakeError

T = TypeVar("T")


class WaitTimeout(TidelakeError):
    """The awaited condition did not hold in time; the message says what and for how long."""


def wait_until(ready: Callable[[], T], timeout_s: float, what: str, check: Callable[[], None] | None = None, *,
               interval_s: float = 0.1, waiting: Callable[[], str] | None = None) -> T:
    """The first truthy value of `ready()`; WaitTimeout after `timeout_s` (with `waiting()`'s detail)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check is not None:
            check()
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f": {waiting()}" if waiting is not None else ""
            raise WaitTimeout(f"timed out after {timeout_s:.0f}s waiting for {what}{detail}")
        time.sleep(interval_s)
