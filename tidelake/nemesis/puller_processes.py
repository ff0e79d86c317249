"""The changefeed as `tidelake pull` child processes, one per shard, and puller crashes as real
SIGKILLs: between flushes by os.kill, at a lander failpoint armed through TIDELAKE_FAILPOINTS in
the shard's environment. A shard exiting by itself is a failure with its exit code.

More: docs/internals.md#puller_processes.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from tidelake.capture.changefeed.reshard import missing_shards
from tidelake.errors import TidelakeError
from tidelake.failpoints import ENV
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_by_puller
from tidelake.nemesis.landing_check import Anomaly
from tidelake.nemesis.plan import (
    BETWEEN_FLUSHES,
    CRASH_POINT_WAIT_S,
    DDL_CRASH_POINTS,
    LAKE_WRITE_ERROR,
    PULLER_CRASH,
    FaultEvent,
    SchedulePlan,
    crash_shards,
)

STOP_TIMEOUT_S = 60.0
# Seconds from a process's start to its lander's first flush (imports, PD, the schema read) and,
# for the first processes, from their start to the traffic's: subtracted from an armed crash's
# offset when counting the flushes before it.
STARTUP_S = 2.0
SETUP_S = 3.0
# A point is passed once a flush interval on an idle machine, less often on a loaded one: the
# count assumes twice the interval, so a crash rather strikes early than misses.
PASS_EVERY_INTERVALS = 2
POLL_S = 0.05


class ProcessPullers:
    """Shard processes of one schedule; `kills` counts the real SIGKILLs by where they struck."""

    def __init__(self, config_path: Path, changefeed_id: str, shards: int, plan: SchedulePlan, flush_interval_s: float,
                 logs: Path, faults: Counter[str], missed: Counter[str], anomalies: list[Anomaly]) -> None:
        self._config = config_path
        self._cf = changefeed_id
        self._shards = shards
        self._flush_s = flush_interval_s
        self._logs = logs
        self._faults, self._missed, self._anomalies = faults, missed, anomalies
        self.kills: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self._events = plan.events
        self._target = crash_shards(plan, shards)
        self._pending = {i for i, e in enumerate(plan.events) if e.kind == PULLER_CRASH and e.point != BETWEEN_FLUSHES}
        self._struck: dict[int, threading.Event] = {i: threading.Event() for i in self._pending}
        self._mu = threading.Lock()
        self._procs: list[subprocess.Popen | None] = [None] * shards
        self._armed: list[int | None] = [None] * shards  # the event index armed in each process
        self._stderr: list[Path | None] = [None] * shards  # each process's stderr
        self._spawned = 0
        self._begin: float | None = None
        self._stopping = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="nemesis-pullers", daemon=True)

    def start(self) -> ProcessPullers:
        self._logs.mkdir(parents=True, exist_ok=True)
        with self._mu:
            try:
                for shard in range(self._shards):
                    self._spawn(shard)
            except BaseException:
                for shard in range(self._shards):  # no orphan of a start that failed part way
                    self._kill(shard)
                raise
        self._monitor.start()
        return self

    def ready(self, layout: LakeLayout) -> bool:
        """Every shard has landed its first flush."""
        by_puller = read_by_puller(layout)
        return bool(by_puller) and not missing_shards(by_puller, self._cf, self._shards)

    def check(self) -> None:
        """Raise if a shard failed before the schedule's traffic began (the schedule cannot run)."""
        if self._begin is None and self._anomalies:
            raise TidelakeError(f"a puller shard failed at start: {self._anomalies[0].detail}")

    def begin_traffic(self) -> None:
        self._begin = time.monotonic()

    def crash(self, index: int, event: FaultEvent) -> None:
        """The plan's crash `index`: a SIGKILL now, or wait for the one armed at its point."""
        shard = self._target[index]
        if event.point != BETWEEN_FLUSHES and self._struck[index].wait(CRASH_POINT_WAIT_S):
            return  # counted by the monitor when the process died at the point
        with self._mu:
            self._reap_exited(shard)  # an exit the monitor has not seen yet is judged as it would be
            if event.point != BETWEEN_FLUSHES:
                if self._struck[index].is_set():
                    return
                self._pending.discard(index)
                self._missed[event.point] += 1
            self._kill(shard)
            self._faults[PULLER_CRASH] += 1
            self.kills[BETWEEN_FLUSHES] += 1
            self._spawn(shard)

    def fail_writes(self, event: FaultEvent) -> None:
        self.skipped[LAKE_WRITE_ERROR] += 1

    def replace_failed(self) -> None:
        """The monitor thread starts a failed shard again as soon as it is gone."""

    def end_faults(self) -> None:
        """Every crash of the plan has struck or been replaced by a kill at its offset by now."""

    def stop(self) -> None:
        """SIGTERM every shard: each flushes and exits 0, else `puller_failed` or `puller_hung`."""
        self._stopping.set()
        self._monitor.join()
        with self._mu:
            for proc in self._procs:
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for shard, proc in enumerate(self._procs):
                if proc is None:
                    continue
                try:
                    code = proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._anomalies.append(Anomaly("puller_hung", 0, 0, f"shard {shard} did not stop within "
                                                   f"{STOP_TIMEOUT_S:.0f}s of SIGTERM"))
                    self._kill(shard)
                    continue
                if code != 0:
                    self._failed(shard, code)

    # --- under self._mu ------------------------------------------------------------------

    def _spawn(self, shard: int) -> None:
        armed = min((i for i in self._pending if self._target[i] == shard), default=None)
        env = {k: v for k, v in os.environ.items() if k != ENV}
        env.setdefault("GRPC_VERBOSITY", "ERROR")
        if armed is not None:
            event = self._events[armed]
            env[ENV] = f"{event.point}={self._passes_before(event)}*off->kill"
        self._spawned += 1
        path = self._stderr[shard] = self._logs / f"shard{shard}-{self._spawned}.log"
        with path.open("wb") as log:
            self._procs[shard] = subprocess.Popen(
                [sys.executable, "-m", "tidelake", "pull", "--config", str(self._config), "--shard",
                 f"{shard}/{self._shards}", "--progress-interval", "3600"],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        self._armed[shard] = armed

    def _passes_before(self, event: FaultEvent) -> int:
        """How many passes of the event's point the new process lets through before it dies."""
        if event.point in DDL_CRASH_POINTS:
            return 0
        now = time.monotonic()
        until = (self._begin + event.at_s - now) if self._begin is not None else SETUP_S + event.at_s
        return max(0, math.floor((until - STARTUP_S) / (PASS_EVERY_INTERVALS * self._flush_s)))

    def _kill(self, shard: int) -> None:
        proc = self._procs[shard]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        if proc is not None:
            proc.wait()

    def _failed(self, shard: int, code: int) -> None:
        path = self._stderr[shard]
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()] if path else []
        last = lines[-1] if lines else "(no output)"
        self._anomalies.append(Anomaly("puller_failed", 0, 0, f"shard {shard} exited with {code}: {last}"))

    def _watch(self) -> None:
        """Start a shard again once its process is gone: count a kill at its armed point, or a failure."""
        while not self._stopping.wait(POLL_S):
            with self._mu:
                for shard in range(self._shards):
                    self._reap_exited(shard)

    def _reap_exited(self, shard: int) -> None:
        """If the shard's process has exited, say how (a kill at its armed point, else a failure)
        and start it again."""
        proc = self._procs[shard]
        code = proc.poll() if proc is not None else None
        if code is None:
            return
        armed = self._armed[shard]
        if code == -signal.SIGKILL and armed is not None and self._killed_itself(shard, armed):
            self._pending.discard(armed)
            self._faults[PULLER_CRASH] += 1
            self.kills[self._events[armed].point] += 1
            self._struck[armed].set()
        else:
            self._failed(shard, code)
        self._spawn(shard)

    def _killed_itself(self, shard: int, armed: int) -> bool:
        """Its stderr has the failpoint's line (tidelake.failpoints.kill_self): not another SIGKILL."""
        path = self._stderr[shard]
        said = f"failpoint {self._events[armed].point}: kill"
        return path is not None and any(line.startswith(said) for line in path.read_text(errors="replace").splitlines())
