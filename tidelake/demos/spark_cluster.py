"""A Spark standalone cluster on loopback: one master and one worker of the installed pyspark.

pip's pyspark has no sbin/start-master.sh, but its launcher `bin/spark-class` runs the standalone
Master and Worker classes in the foreground, which is what a service manager would run; each is a
child process stopped by its pid. Executors the worker starts run this venv's Python
(PYSPARK_PYTHON), so the mount's Arrow UDFs find tidelake installed.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pyspark

from tidelake.demos.supervisor import Child, accepting, await_stage, free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_class() -> Path:
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


class SparkCluster:
    """Master on 127.0.0.1:port and one worker with `cores` and `memory` for executors."""

    def __init__(self, workdir: Path, cores: int = 2, memory: str = "2g") -> None:
        self.workdir = workdir
        self.cores = cores
        self.memory = memory
        self.port = free_port(0)
        self.master_log = workdir / "spark-master.log"
        self.worker_log = workdir / "spark-worker.log"
        self.children: list[Child] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 180.0) -> None:
        """A fresh master and worker: the logs and work folder of an earlier cluster here are
        removed first (registered_apps reads this run's log only; each application leaves its
        jars in the work folder)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        for log in (self.master_log, self.worker_log):
            log.unlink(missing_ok=True)
        shutil.rmtree(self.workdir / "work", ignore_errors=True)
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(self.workdir),
               "SPARK_WORKER_DIR": str(self.workdir / "work"), "PYSPARK_PYTHON": sys.executable}
        master = Child("spark master", [str(spark_class()), MASTER_CLASS, "--host", "127.0.0.1", "--port",
                                        str(self.port), "--webui-port", str(free_port(0))], self.master_log, env)
        self.children.append(master)
        await_stage("spark master", lambda: accepting(self.port), timeout_s, self.master_log, [master.check], 1)
        self._env = env
        self.start_worker(timeout_s)

    def start_worker(self, timeout_s: float = 180.0) -> int:
        """A worker registered with the master (again, after kill_worker); its pid."""
        registrations = self._worker_registrations()
        worker = Child("spark worker", [str(spark_class()), WORKER_CLASS, "--host", "127.0.0.1", "--cores",
                                        str(self.cores), "--memory", self.memory, "--webui-port", str(free_port(0)),
                                        self.url], self.worker_log, self._env)
        self.children.append(worker)
        await_stage("spark worker", lambda: self._worker_registrations() > registrations, timeout_s, self.worker_log,
                    self.checks(), 1)
        return worker.process.pid

    def executors(self) -> int:
        """How many executor JVMs the worker runs now (its child processes)."""
        return max(0, len(self.children[-1].tree()) - 1) if len(self.children) > 1 else 0

    def kill_worker(self) -> tuple[int, int]:
        """SIGKILL the worker with its executors (a lost machine); its pid and how many processes died."""
        worker = self.children.pop()
        return worker.process.pid, worker.kill()

    def checks(self) -> list:
        """One check over the processes running when it is called (the worker may be replaced)."""
        return [self.check]

    def check(self, stage: str) -> None:
        for child in self.children:
            child.check(stage)

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop(grace_s=20)
        self.children = []

    def registered_apps(self) -> list[str]:
        """Names of the applications the master registered (spark-submitted jobs name themselves
        `tidelake-<kind>`, tidelake.orchestration.job_entry)."""
        marker = "INFO Master: Registered app "
        lines = self.master_log.read_text(errors="replace").splitlines() if self.master_log.exists() else []
        return [line.split(marker, 1)[1].rsplit(" with ID ", 1)[0] for line in lines if marker in line]

    def running_apps(self) -> list[str]:
        """Names of the applications registered and not yet removed that have an executor launched."""
        return [name for name, _ in self._running_apps()]

    def busy_apps(self) -> list[str]:
        """Names of the running applications whose executor on the worker has started a task (its
        stderr in the worker's work folder says `Running task`): work the worker's loss takes away."""
        work = self.workdir / "work"
        return [name for name, app_id in self._running_apps()
                if any("Running task" in stderr.read_text(errors="replace")
                       for stderr in work.glob(f"{app_id}/*/stderr"))]

    def _running_apps(self) -> list[tuple[str, str]]:
        lines = self.master_log.read_text(errors="replace").splitlines() if self.master_log.exists() else []
        names: dict[str, str] = {}
        for line in lines:
            if "INFO Master: Registered app " in line:
                name, app_id = line.split("INFO Master: Registered app ", 1)[1].rsplit(" with ID ", 1)
                names[app_id.strip()] = name
        launched = {app_id for app_id in names if any(f"Launching executor {app_id}/" in line for line in lines)}
        removed = {app_id for app_id in names if any(f"Removing app {app_id}" in line for line in lines)}
        return [(names[app_id], app_id) for app_id in sorted(launched - removed)]

    def _worker_registrations(self) -> int:
        if not self.worker_log.exists():
            return 0
        return self.worker_log.read_text(errors="replace").count("Successfully registered with master")

