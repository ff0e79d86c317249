"""Crashes and lake write errors of a merge run on the caller's thread, through the apply failpoints.

Like the puller's (tidelake.nemesis.puller_crash), a crash is made to look like one to the lake:
at the chosen pass of the chosen failpoint the run raises MergeCrashed, and from then on every
apply failpoint it passes raises too, so it commits nothing more. MergeCrashed derives from
BaseException, as SystemExit does: the merge's `except Exception` handlers, which log a table's
failure and go on with the next table (and then append the merge log), must not catch a crash.
A table thread of a combined run (run_merge's pool) stops at its next failpoint: at most the
commit it was making lands, as if the process had died a moment later. The nemesis then
`restart()`s the switch and runs the step again as a fresh run.

A write error is what a failed or unacknowledged lake write looks like to the merge: one
MergeWriteError, an ordinary exception, at the chosen pass; the run's own handlers see it, the
run goes on and must report it.
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
