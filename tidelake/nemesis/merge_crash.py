"""Crashes of a merge run on the caller's thread, through the apply failpoints.

Like the puller's (tidelake.nemesis.puller_crash), a crash is made to look like one to the lake:
at the chosen pass of the chosen failpoint the run raises MergeCrashed, and from then on every
apply failpoint it passes raises too, so it commits nothing more. MergeCrashed derives from
BaseException, as SystemExit does: the merge's `except Exception` handlers, which log a table's
failure and go on with the next table (and then append the merge log), must not catch a crash.
A table thread of a combined run (run_merge's pool) stops at its next failpoint: at most the
commit it was making lands, as if the process had died a moment later. The nemesis then
`restart()`s the switch and runs the step again as a fresh run.
"""

from __future__ import annotations

import threading

from tidelake.failpoints import Action, armed
from tidelake.nemesis.plan import APPLY_FAILPOINTS, MergeCrash


class MergeCrashed(BaseException):  # noqa: N818 - named for what happened, like SystemExit
    """Raised at an apply failpoint of a merge run the nemesis crashed."""


class MergeCrashSwitch:
    """Arms the apply failpoints; one merge run at a time (the nemesis runs its steps in turn)."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._crash: MergeCrash | None = None
        self._passes = 0
        self._dead = False

    def armed(self):
        """Context manager: the failpoints are armed while the schedule's merges run."""
        action: Action = self._hit
        return armed(APPLY_FAILPOINTS, action)

    def crash_at(self, crash: MergeCrash) -> None:
        """The next run dies at the `crash.nth` pass of `crash.point`."""
        with self._mu:
            self._crash, self._passes = crash, 0

    def restart(self) -> None:
        """A fresh run: nothing armed, nothing dead."""
        with self._mu:
            self._crash, self._passes, self._dead = None, 0, False

    def _hit(self, name: str, owner: object) -> None:
        with self._mu:
            if self._dead:
                raise MergeCrashed(f"crashed merge run passed {name} ({owner})")
            if self._crash is None or name != self._crash.point:
                return
            self._passes += 1
            if self._passes == self._crash.nth:
                self._dead = True
                raise MergeCrashed(f"merge run crashed at pass {self._passes} of {name} ({owner})")
