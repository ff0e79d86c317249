"""Airflow as its separate components under a supervisor, the way a deployment runs it: `airflow db
migrate`, then the scheduler, dag-processor, triggerer and api-server, each a child process with its
own log. One that exits (a crash, a lost database) is started again after a pause, as systemd's
Restart= or a Kubernetes Deployment would; `kill` ends one with its whole process tree, as a lost
container does. `airflow standalone` restarts nothing (airflow-core cli/commands/standalone_command.py
SubCommand.run), which is why `make integration` runs Airflow this way.
Owner: tidelake.demos.on_airflow.

More: docs/internals.md#airflow_components.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from tidelake.demos.supervisor import Child, StageFailed

COMPONENTS = ("scheduler", "dag-processor", "triggerer", "api-server")
RESTART_PAUSE_S = 5.0  # how long the supervisor waits before starting a dead component again
# Exits of one component on its own (kill() is not counted) before the run fails: a restart loop is
# a finding, never hidden behind the supervisor.
MAX_RESTARTS = 3
# A component alive but not heartbeating (Airflow's /monitor/health says unhealthy) this long after
# its start is killed and started again, as a Kubernetes liveness probe (`airflow jobs check`) would.
LIVENESS_GRACE_S = 60.0
STOP_GRACE_S = 5.0


class AirflowComponents:
    """The four components of one Airflow; `check` is the supervisor's round."""

    name = "airflow components"

    def __init__(self, command: list[str], logs: Path, env: dict[str, str], cwd: Path,
                 say: Callable[[str], None]) -> None:
        self.command = command  # the `airflow` CLI
        self.logs = logs
        self.env = env
        self.cwd = cwd
        self.say = say
        self.children: dict[str, Child] = {}
        self.restarts = dict.fromkeys(COMPONENTS, 0)
        self.started: dict[str, float] = {}
        # component -> healthy, from Airflow's health endpoint; set once the API is up
        self.liveness: Callable[[], dict[str, bool]] | None = None

    @property
    def log(self) -> Path:
        return self.logs / "airflow-scheduler.log"

    def log_of(self, component: str) -> Path:
        return self.logs / f"airflow-{component}.log"

    def start(self) -> None:
        """Migrate the metadata database, then start every component."""
        log = self.logs / "airflow-db-migrate.log"
        with log.open("ab") as out:
            code = subprocess.run([*self.command, "db", "migrate"], stdout=out, stderr=subprocess.STDOUT,
                                  env=self.env, cwd=self.cwd).returncode
        if code != 0:
            raise StageFailed("airflow startup", f"airflow db migrate exited with code {code}", log)
        for component in COMPONENTS:
            self._start(component)

    def pid(self, component: str) -> int:
        return self.children[component].process.pid

    def kill(self, component: str) -> tuple[int, int]:
        """SIGKILL the component with every process it started (for the scheduler: its executor's
        task processes and their spark-submit drivers); its pid and how many processes died. It
        stays down until `restart`."""
        child = self.children.pop(component)
        return child.process.pid, child.kill()

    def restart(self, component: str) -> int:
        """Start a killed component again; its new pid."""
        return self._start(component)

    def check(self, stage: str) -> None:
        """A component that exited is started again after RESTART_PAUSE_S, with a line saying so;
        the (MAX_RESTARTS+1)th exit of one component fails the stage."""
        for component, child in list(self.children.items()):
            code = child.process.poll()
            if code is None:
                continue
            self.restarts[component] += 1
            if self.restarts[component] > MAX_RESTARTS:
                raise StageFailed(stage, f"airflow {component} exited with code {code} "
                                  f"{self.restarts[component]} times", child.log)
            self.say(f"airflow {component} (pid {child.process.pid}) exited with code {code}; the supervisor "
                     f"starts it again in {RESTART_PAUSE_S:.0f}s (log: {child.log})")
            del self.children[component]
            time.sleep(RESTART_PAUSE_S)
            self.say(f"airflow {component} started again: pid {self._start(component)}")
        self.probe()

    def probe(self) -> None:
        """The liveness probe: a component running for LIVENESS_GRACE_S whose heartbeat Airflow
        reports unhealthy is SIGKILLed and started again (counted as a restart). After a lost
        database connection the scheduler leaves its loop and waits, alive, for its running tasks
        (airflow-core SchedulerJobRunner._execute), which for the puller's task is up to an hour."""
        health = self.liveness() if self.liveness is not None else {}
        for component in ("scheduler", "triggerer", "dag-processor"):
            healthy = health.get(component.replace("-", "_"))
            child = self.children.get(component)
            if healthy is not False or child is None or time.monotonic() - self.started[component] < LIVENESS_GRACE_S:
                continue
            self.restarts[component] += 1
            if self.restarts[component] > MAX_RESTARTS:
                raise StageFailed("liveness", f"airflow {component} stopped heartbeating {self.restarts[component]} "
                                  "times", child.log)
            pid, died = child.process.pid, child.kill()
            del self.children[component]
            self.say(f"airflow {component} (pid {pid}) is alive but not heartbeating (Airflow's health: unhealthy); "
                     f"the supervisor's liveness probe killed it ({died} processes) and starts it again in "
                     f"{RESTART_PAUSE_S:.0f}s (log: {child.log})")
            time.sleep(RESTART_PAUSE_S)
            self.say(f"airflow {component} started again: pid {self._start(component)}")

    def stop(self) -> None:
        """Each component by its tree, the api-server last (the others report through it). The
        scheduler gets STOP_GRACE_S: on SIGTERM its LocalExecutor waits for running tasks (the
        puller's run for up to an hour), and the SIGTERM the rest of its tree gets next is what a
        task flushes and ends on."""
        for component in COMPONENTS:
            child = self.children.pop(component, None)
            if child is not None:
                child.stop(grace_s=STOP_GRACE_S if component == "scheduler" else 60.0)

    def _start(self, component: str) -> int:
        child = Child(f"airflow {component}", [*self.command, component], self.log_of(component), self.env,
                      cwd=self.cwd)
        self.children[component] = child
        self.started[component] = time.monotonic()
        return child.process.pid
