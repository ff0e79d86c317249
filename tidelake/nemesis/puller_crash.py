"""Crashes and lake write errors for a puller on a thread, through the lander's failpoints (the
nemesis's default `--pullers thread`; tidelake.nemesis.puller_processes is the process mode).

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
from collections import Counter
from contextlib import ExitStack

from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.landing.lander import LANDER_FAILPOINTS
from tidelake.config import ChangefeedConfig
from tidelake.errors import TidelakeError
from tidelake.failpoints import Action, armed
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.nemesis.landing_check import Anomaly
from tidelake.nemesis.plan import BETWEEN_FLUSHES, CRASH_POINT_WAIT_S, LAKE_WRITE_ERROR, PULLER_CRASH, FaultEvent


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


class ThreadPullers:
    """The changefeed as one PullerThread; a crash stops the crashed one and starts a new one."""

    def __init__(self, config: ChangefeedConfig, faults: Counter[str], missed: Counter[str],
                 anomalies: list[Anomaly]) -> None:
        self._config = config
        self._faults, self._missed, self._anomalies = faults, missed, anomalies
        self.kills: Counter[str] = Counter()  # no process is killed in this mode
        self.skipped: Counter[str] = Counter()
        self._switch = CrashSwitch()
        self._armed = 0
        self._stack = ExitStack()
        self._puller: PullerThread | None = None

    def start(self) -> ThreadPullers:
        self._stack.enter_context(self._switch.armed())
        try:
            self._puller = self._start()
        except BaseException:
            self._stack.close()  # a puller that did not start leaves no failpoint armed
            raise
        return self

    def ready(self, layout: LakeLayout) -> bool:
        return bool(read_watermarks(layout).ddl_resolved)

    def check(self) -> None:
        self._puller.check()

    def begin_traffic(self) -> None:
        """Crashes are aimed when they strike; nothing to prepare."""

    def crash(self, index: int, event: FaultEvent) -> None:
        if event.point == BETWEEN_FLUSHES:
            self._switch.crash_now()
        else:
            self._switch.crash_at(event.point)
            if not self._switch.crashed.wait(CRASH_POINT_WAIT_S):  # no flush passed the point: crash between flushes
                self._switch.cancel_crash()
                self._switch.crash_now()
                self._missed[event.point] += 1
        self._faults[PULLER_CRASH] += 1
        self._stop_puller()
        if self._puller.error is not None:
            self._record_failure()
        self._puller = self._start()

    def fail_writes(self, event: FaultEvent) -> None:
        self._armed += 1
        self._switch.fail_writes(event.point, event.duration_s)

    def replace_failed(self) -> None:
        """A puller that stopped with an error nobody injected: recorded, and a new one started."""
        if self._puller.error is not None:
            self._record_failure()
            self._stop_puller()
            self._puller = self._start()

    def end_faults(self) -> None:
        """Undo the temporary faults; count the write errors that struck and the ones that did not."""
        self._switch.clear_errors()
        self._switch.cancel_crash()
        self._faults[LAKE_WRITE_ERROR] += self._switch.write_errors_struck
        self._missed[LAKE_WRITE_ERROR] += self._armed - self._switch.write_errors_struck

    def stop(self) -> None:
        try:
            if self._puller is not None:
                self._stop_puller()
        finally:
            self._stack.close()

    def _start(self) -> PullerThread:
        return PullerThread(self._config, progress_interval_s=3600, gc_advance_interval_s=1.0).start()

    def _stop_puller(self) -> None:
        """Stop it gracefully; one that does not stop within its timeout is the anomaly `puller_hung`."""
        try:
            self._puller.stop()
        except TidelakeError as err:
            self._anomalies.append(Anomaly("puller_hung", 0, 0, str(err)))

    def _record_failure(self) -> None:
        error = self._puller.error
        line = (str(error).splitlines() or [type(error).__name__])[0]
        self._anomalies.append(Anomaly("puller_failed", 0, 0, f"{type(error).__name__}: {line}"))
