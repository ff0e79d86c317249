"""Crashes and lake write errors for a puller on a thread, through the lander's failpoints.

A puller in the caller's process cannot be SIGKILLed, so a crash is made to look like one to the
lake: from the crash point on, its lander commits nothing more (every later failpoint of that
lander raises PullerCrashed), whatever it buffered is lost, and the nemesis then stops its thread
and starts a new puller on the same lake, which resumes from the durable watermarks. A crash
inside a flush strikes when the lander next passes the chosen point: before a commit, or after
one landed and before the next. Only the lander that is current when the fault is armed is hit.
"""

from __future__ import annotations

import threading
import time

from tidelake.errors import TidelakeError
from tidelake.failpoints import Action, armed
from tidelake.lake.lander import LANDER_FAILPOINTS


class PullerCrashed(TidelakeError):
    """Raised at a failpoint of a lander the nemesis crashed: it must land nothing more."""


class LakeWriteError(OSError):
    """An injected object-store failure at a lander failpoint."""


class CrashSwitch:
    """Arms the lander failpoints for one schedule; crashes and write errors aim at the current lander."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._current: object | None = None
        self._dead: list[object] = []
        self._crash_at: str | None = None
        self.crashed = threading.Event()
        self._error_at: str | None = None
        self._error_until = 0.0
        self._error_struck = False
        self.write_errors_struck = 0  # fail_writes() calls whose point was passed while they lasted

    def armed(self):
        """Context manager: the failpoints are armed while the schedule runs."""
        action: Action = self._hit
        return armed(LANDER_FAILPOINTS, action)

    def crash_now(self) -> None:
        """The current lander is dead from now on (a crash between flushes, or inside one)."""
        with self._mu:
            if self._current is not None:
                self._dead.append(self._current)
            self.crashed.set()

    def crash_at(self, point: str) -> None:
        """The current lander dies when it next passes `point`; `crashed` is set then."""
        with self._mu:
            self.crashed.clear()
            self._crash_at = point

    def cancel_crash(self) -> None:
        with self._mu:
            self._crash_at = None

    def fail_writes(self, point: str, duration_s: float) -> None:
        """The current lander's writes fail at `point` for `duration_s` seconds."""
        with self._mu:
            self._error_at, self._error_until = point, time.monotonic() + duration_s
            self._error_struck = False

    def clear_errors(self) -> None:
        with self._mu:
            self._error_at = None

    def _hit(self, name: str, owner: object) -> None:
        with self._mu:
            if name == "lander.open":
                self._current = owner
                self._crash_at = self._error_at = None  # a new puller: earlier faults were for the old one
                return
            if any(owner is dead for dead in self._dead):
                raise PullerCrashed(f"crashed lander passed {name}")
            if owner is not self._current:
                return
            if self._crash_at == name:
                self._crash_at = None
                self._dead.append(owner)
                self.crashed.set()
                raise PullerCrashed(f"puller crashed at {name}")
            if self._error_at == name and time.monotonic() < self._error_until:
                if not self._error_struck:
                    self._error_struck = True
                    self.write_errors_struck += 1
                raise LakeWriteError(f"injected lake write error at {name}")
