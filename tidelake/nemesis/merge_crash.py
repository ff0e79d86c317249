"""Crashes and lake write errors of a merge run on the caller's thread, through the apply
failpoints: at the chosen pass the run raises MergeCrashed, and every apply failpoint it passes
after raises too, so the crashed run commits nothing more, as a dead process would.

More: docs/internals.md#merge_crash.
"""

from __future__ import annotations

import threading

from tidelake.failpoints import Action, armed
from tidelake.nemesis.plan import APPLY_FAILPOINTS, MERGE_CRASH, MergeFault


class MergeCrashed(BaseException):  # noqa: N818 - named for what happened, like SystemExit
    """Raised at an apply failpoint of a merge run the nemesis crashed."""


class MergeWriteError(Exception):
    """Raised once at an apply failpoint: the lake write there failed, or its acknowledgement was lost."""


class MergeCrashSwitch:
    """Arms the apply failpoints; one merge run at a time (the nemesis runs its steps in turn)."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._fault: MergeFault | None = None
        self._passes = 0
        self._dead = False
        self._write_error_struck = False

    def armed(self):
        """Context manager: the failpoints are armed while the schedule's merges run."""
        action: Action = self._hit
        return armed(APPLY_FAILPOINTS, action)

    def fault_at(self, fault: MergeFault) -> None:
        """The next run meets `fault` at the `fault.nth` pass of `fault.point`."""
        with self._mu:
            self._fault, self._passes = fault, 0

    @property
    def write_error_struck(self) -> bool:
        with self._mu:
            return self._write_error_struck

    def restart(self) -> None:
        """A fresh run: nothing armed, nothing dead, no write error."""
        with self._mu:
            self._fault, self._passes, self._dead, self._write_error_struck = None, 0, False, False

    def _hit(self, name: str, owner: object) -> None:
        with self._mu:
            if self._dead:
                raise MergeCrashed(f"crashed merge run passed {name} ({owner})")
            if self._fault is None or name != self._fault.point:
                return
            self._passes += 1
            if self._passes != self._fault.nth:
                return
            if self._fault.kind == MERGE_CRASH:
                self._dead = True
                raise MergeCrashed(f"merge run crashed at pass {self._passes} of {name} ({owner})")
            self._fault, self._write_error_struck = None, True
            error = MergeWriteError(f"injected lake write error at pass {self._passes} of {name} ({owner})")
        raise error
