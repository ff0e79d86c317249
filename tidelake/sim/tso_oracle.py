"""PD's timestamp oracle for the simulator (docs/wire.md#pd-server-behaviour Tso, docs/wire.md#tso-format format).

Strictly monotonic across threads; physical part follows the wall clock, logical part counts within
a millisecond. A batch request returns only its largest TSO, as PD does, and the caller derives the
others, so logical 0 is never handed out.
"""

from __future__ import annotations

import threading
import time

from tidelake.tso import LOGICAL_MASK, compose


class TsoOracle:
    def __init__(self, clock_ms=None) -> None:
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()
        self._physical = 0
        self._logical = 0

    def next(self, count: int = 1) -> int:
        """Allocate `count` consecutive TSOs and return the largest (PD `Tso` count semantics)."""
        if count <= 0 or count > LOGICAL_MASK:
            raise ValueError(f"tso count must be in 1..{LOGICAL_MASK}, got {count}")
        with self._lock:
            now = self._clock_ms()
            if now > self._physical:
                self._physical, self._logical = now, 0
            if self._logical + count > LOGICAL_MASK:
                # Logical overflow: PD waits for the next millisecond; we borrow it ahead of time.
                self._physical, self._logical = self._physical + 1, 0
            self._logical += count
            return compose(self._physical, self._logical)

    def current(self) -> int:
        """The last TSO handed out (0 before the first); allocates nothing."""
        with self._lock:
            return compose(self._physical, self._logical) if self._physical else 0

