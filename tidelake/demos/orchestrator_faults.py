"""The orchestrator's faults of `make integration`, each when it hits work in flight and said in
one line with when the component came back: the Airflow triggerer SIGKILLed while it runs the
new-data trigger, the scheduler SIGKILLed with its task processes while merge tasks run,
PostgreSQL restarted, and during the bootstrap the Spark worker SIGKILLed while its executor runs
tasks. The killed scheduler's task instances must run again and the trigger fire again; the run's
checks after it (merges past a target taken after the faults, verify) prove nothing was lost.
Owner: tidelake.demos.integration.

More: docs/internals.md#orchestrator_faults.
"""

from __future__ import annotations

import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from tidelake.demos.airflow_components import RESTART_PAUSE_S
from tidelake.demos.on_airflow import RunningAirflow, Say
from tidelake.demos.postgres import Postgres
from tidelake.demos.spark_cluster import SparkCluster
from tidelake.demos.supervisor import StageFailed

MOMENT_TIMEOUT_S = 240.0  # the longest wait for work in flight to hit, and for recovery to show
MERGE_TASKS = ("merge", "syncpoint")
Fault = Callable[[Say, RunningAirflow], None]  # one fault, struck while the traffic runs
T = TypeVar("T")


@dataclass
class OrchestratorFaults:
    """The faults, in order; `postgres` and `cluster` are the run's (no cluster: no worker kill)."""

    postgres: Postgres
    cluster: SparkCluster | None
    _scheduler_killed: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def __call__(self, say: Say, airflow: RunningAirflow) -> None:
        if airflow.components is None:
            raise StageFailed("orchestrator faults", "Airflow runs standalone: nothing restarts a killed component")
        asset_runs = self._kill_triggerer(say, airflow)
        orphans = self._kill_scheduler(say, airflow)
        self._await_orphans(say, airflow, orphans)
        self._restart_postgres(say, airflow, orphans)
        _await(lambda: _asset_runs(airflow) > asset_runs, airflow, "an asset-triggered merge run after the "
               "triggerer's restart", strict=True)
        say(f"{airflow.dags.merge}: {_asset_runs(airflow)} asset-triggered runs: the new-data trigger fires again "
            f"after the triggerer's restart")

    def rotation(self, outage: Fault) -> list[tuple[str, Fault]]:
        """The faults one at a time, for a soak's rotation (tidelake.demos.soak_run): `outage`, the
        triggerer, the scheduler (until its task instances left their try), PostgreSQL."""

        def scheduler(say: Say, airflow: RunningAirflow) -> None:
            self._await_orphans(say, airflow, self._kill_scheduler(say, airflow))

        return [("S3 outage", outage), ("triggerer kill", lambda say, airflow: self._kill_triggerer(say, airflow)),
                ("scheduler kill", scheduler),
                ("PostgreSQL restart", lambda say, airflow: self._restart_postgres(say, airflow, []))]

    def _kill_triggerer(self, say: Say, airflow: RunningAirflow) -> int:
        """The new-data trigger is an asset watcher: it runs in the triggerer from the merge DAG's
        unpause on, so any moment hits it. The merge DAG's asset-triggered runs before the kill."""
        before = _asset_runs(airflow)
        pid, died, new_pid, down_s = _kill_and_restart(airflow, "triggerer")
        say(f"SIGKILLed the Airflow triggerer (pid {pid}, {died} processes) while it ran {airflow.dags.merge}'s "
            f"new-data trigger ({before} asset-triggered runs so far); started again after {down_s:.0f}s: pid {new_pid}")
        return before

    def _kill_scheduler(self, say: Say, airflow: RunningAirflow) -> list[dict[str, Any]]:
        """When a merge or syncpoint task runs; the task instances it ran (they died with it)."""
        running = _await(lambda: [t for t in _running(airflow) if t["task_id"] in MERGE_TASKS], airflow,
                         "a running merge task")
        orphans = _running(airflow)
        self._scheduler_killed = datetime.now(timezone.utc)
        pid, died, new_pid, down_s = _kill_and_restart(airflow, "scheduler")
        say(f"SIGKILLed the Airflow scheduler (pid {pid}) with its {died - 1} task processes while "
            f"{', '.join(_name(t) for t in running or orphans) or 'no merge task'} ran; started again after "
            f"{down_s:.0f}s: pid {new_pid}")
        return orphans

    def kill_spark_worker(self, say: Say, airflow: RunningAirflow) -> None:
        """While the bootstrap runs (AirflowDemoOptions.during_bootstrap): once its application's
        executor runs tasks. A merge at the integration's rate writes its small windows with
        delta-rs on the driver (tidelake.merge.table_merge DRIVER_WINDOW_MAX_ROWS): its executor
        idles, and killing the worker under it took no work away."""
        cluster = self.cluster
        if cluster is None:
            return
        apps = _await(lambda: cluster.busy_apps(), airflow, "a Spark application whose executor runs tasks")
        pid, died = cluster.kill_worker()
        down = time.monotonic()
        time.sleep(RESTART_PAUSE_S)
        new_pid = cluster.start_worker()
        say(f"SIGKILLed the Spark worker (pid {pid}) with the {died - 1} processes of its executor while "
            f"{', '.join(apps or ['no application'])} ran tasks on it; started again and registered with the master "
            f"after {time.monotonic() - down:.0f}s: pid {new_pid}")

    def _restart_postgres(self, say: Say, airflow: RunningAirflow, orphans: list[dict[str, Any]]) -> None:
        """Once a task runs that the scheduler kill did not end (its task instances stay `running`
        until reset, with nobody running them)."""
        dead = {t["id"] for t in orphans}
        running = _await(lambda: [t for t in _running(airflow) if t["id"] not in dead], airflow,
                         "a running task after the scheduler's restart") or []
        pid = self.postgres.pid()
        down = time.monotonic()
        self.postgres.restart()
        say(f"restarted PostgreSQL (pg_ctl restart -m fast: pid {pid} ended every session of Airflow and of the "
            f"Iceberg catalog) while {', '.join(_name(t) for t in running) or 'no task'} ran; accepting again after "
            f"{time.monotonic() - down:.0f}s: pid {self.postgres.pid()}")
        _await(lambda: airflow.api.healthy(), airflow, "the Airflow API after the PostgreSQL restart", strict=True)

    def _await_orphans(self, say: Say, airflow: RunningAirflow, orphans: list[dict[str, Any]]) -> None:
        """The killed scheduler's task instances are no longer running in their killed try."""

        def orphans_left() -> list[dict[str, Any]]:
            # a reset task instance gets a new id (airflow-core TaskInstance.prepare_db_for_next_try)
            running = {t["id"] for t in _running(airflow)}
            return [t for t in orphans if t["id"] in running]

        _await(lambda: not orphans_left(), airflow, "the killed scheduler's task instances to leave their try",
               strict=True)
        reset = _reset_at(airflow.components.log_of("scheduler"), self._scheduler_killed)
        when = (f"reset by the new scheduler {(reset - self._scheduler_killed).total_seconds():.0f}s after the kill"
                if reset is not None else "no reset line in the scheduler's log")
        say(f"the {len(orphans)} task instance(s) the scheduler died with left their killed try ({when}): "
            + ", ".join(_name(t) for t in orphans))


def _kill_and_restart(airflow: RunningAirflow, component: str) -> tuple[int, int, int, float]:
    """SIGKILL an Airflow component with its process tree, start it again after RESTART_PAUSE_S:
    its pid, the processes killed, the new pid and the seconds it was down."""
    pid, died = airflow.components.kill(component)
    down = time.monotonic()
    time.sleep(RESTART_PAUSE_S)
    new_pid = airflow.components.restart(component)
    return pid, died, new_pid, time.monotonic() - down


def _reset_at(log: Path, after: datetime) -> datetime | None:
    """When the scheduler logged its reset of orphaned task instances after `after` (airflow-core
    SchedulerJobRunner.adopt_or_reset_orphaned_tasks: "Reset the following N orphaned TaskInstances")."""
    for line in log.read_text(errors="replace").splitlines():
        if "orphaned TaskInstances" in line and line[:1].isdigit():
            at = datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
            if at > after:
                return at
    return None


def _running(airflow: RunningAirflow) -> list[dict[str, Any]]:
    return [*airflow.api.running_tasks(airflow.dags.merge), *airflow.api.running_tasks(airflow.dags.puller)]


def _asset_runs(airflow: RunningAirflow) -> int:
    return airflow.api.run_types(airflow.dags.merge).get("asset_triggered", 0)


def _name(ti: dict[str, Any]) -> str:
    index = f"[{ti['map_index']}]" if ti["map_index"] >= 0 else ""
    return f"{ti['task_id']}{index} (run {ti['dag_run_id']}, try {ti['try_number']})"


def _await(ready: Callable[[], T], airflow: RunningAirflow, what: str, strict: bool = False) -> T | None:
    """The first truthy ready() within MOMENT_TIMEOUT_S, the supervisor's checks run every round (a
    component that died of the fault is started again); an API error is a not-yet. On timeout:
    StageFailed when `strict`, else None (the fault is injected anyway, and its line says so)."""
    deadline = time.monotonic() + MOMENT_TIMEOUT_S
    while time.monotonic() < deadline:
        for check in airflow.checks:
            check("orchestrator faults")
        try:
            found = ready()
        except (OSError, urllib.error.URLError, ValueError, KeyError):
            found = None
        if found:
            return found
        time.sleep(0.5)
    if strict:
        raise StageFailed("orchestrator faults", f"no {what} within {MOMENT_TIMEOUT_S:.0f}s")
    return None
