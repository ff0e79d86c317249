"""A warm Spark: a long-running Spark Connect server that merge runs reach as thin clients, so a
task pays no JVM start and no jar resolution. Started and stopped by the pid it records
(`tidelake spark-server`). Owner: `tidelake spark-server`.

More: docs/internals.md#connect_server.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tidelake.errors import InputError
from tidelake.spark.spark_session import DELTA_CONFS, IVY_SETTINGS, LOCAL_CONFS, delta_package

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002  # Spark Connect's default port
DEFAULT_HOST = "127.0.0.1"
PID_FILE = "server.pid"
LOG_FILE = "server.log"
URL_FILE = "server.url"  # what `status` and `stop` report for the folder's server


@dataclass(frozen=True)
class ServerSettings:
    folder: Path
    port: int = DEFAULT_PORT
    host: str = DEFAULT_HOST
    master: str = "local[*]"
    driver_memory: str = "2g"
    python: str = sys.executable

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def pid_file(self) -> Path:
        return self.folder / PID_FILE

    @property
    def log_file(self) -> Path:
        return self.folder / LOG_FILE

    @property
    def url_file(self) -> Path:
        return self.folder / URL_FILE


def spark_submit() -> Path:
    """The spark-submit of the installed (full) pyspark."""
    import pyspark  # not at the top: `tidelake spark-server stop|status` needs no pyspark

    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():
        raise InputError(f"no spark-submit in {path.parent}: is the full pyspark installed (not pyspark-client)?")
    return path


def server_command(settings: ServerSettings, extra_confs: dict[str, str] | None = None,
                   extra_packages: tuple[str, ...] = ()) -> list[str]:
    """spark-submit arguments of the server: Delta package and confs as a local session has them."""
    confs = {
        **DELTA_CONFS,
        **(LOCAL_CONFS if settings.master.startswith("local") else {}),
        "spark.jars.ivySettings": str(IVY_SETTINGS),
        "spark.pyspark.python": settings.python,
        "spark.connect.grpc.binding.address": settings.host,
        "spark.connect.grpc.binding.port": str(settings.port),
        **(extra_confs or {}),
    }
    command = [str(spark_submit()), "--class", SERVER_CLASS, "--name", "tidelake-spark-connect",
               "--master", settings.master, "--driver-memory", settings.driver_memory,
               "--packages", ",".join([delta_package(), *extra_packages])]
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    return command


def recorded_url(settings: ServerSettings) -> str:
    """The URL the folder's server was started with (the settings' own if none is recorded)."""
    try:
        return settings.url_file.read_text().strip() or settings.url
    except OSError:
        return settings.url


def running_pid(settings: ServerSettings) -> int | None:
    """The pid recorded in the folder if that process is alive and is a Spark Connect server."""
    try:
        pid = int(settings.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        try:
            os.kill(pid, 0)  # no /proc (macOS): alive is all we can tell
        except OSError:
            return None
        return pid
    return pid if SERVER_CLASS in cmdline else None


def accepting(settings: ServerSettings) -> bool:
    try:
        with socket.create_connection((settings.host, settings.port), timeout=1):
            return True
    except OSError:
        return False


def start(settings: ServerSettings, extra_confs: dict[str, str] | None = None, extra_packages: tuple[str, ...] = (),
          timeout_s: float = 300.0) -> int:
    """Start the server unless the folder's server already runs; return its pid once it accepts
    connections. A server that exits or does not listen in time is an InputError naming its log."""
    pid = running_pid(settings)
    if pid is not None:
        return pid
    if accepting(settings):
        raise InputError(f"{settings.host}:{settings.port} is taken by another process; pick another --port")
    settings.folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYSPARK_PYTHON": settings.python}
    env.pop("SPARK_REMOTE", None)  # the server is the classic side
    with open(settings.log_file, "ab") as log:
        process = subprocess.Popen(server_command(settings, extra_confs, extra_packages), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    settings.pid_file.write_text(f"{process.pid}\n")
    settings.url_file.write_text(f"{settings.url}\n")
    deadline = time.monotonic() + timeout_s
    while not accepting(settings):
        if process.poll() is not None:
            settings.pid_file.unlink(missing_ok=True)
            raise InputError(f"Spark Connect server exited with code {process.returncode}; see {settings.log_file}")
        if time.monotonic() > deadline:
            _end(process.pid, 10.0)
            settings.pid_file.unlink(missing_ok=True)
            raise InputError(f"Spark Connect server did not listen on {settings.port} within {timeout_s:.0f}s; "
                             f"see {settings.log_file}")
        time.sleep(0.5)
    return process.pid


def stop(settings: ServerSettings, grace_s: float = 30.0) -> int | None:
    """Stop the server recorded in the folder (SIGTERM, SIGKILL after `grace_s`); its pid, or
    None when none was running."""
    pid = running_pid(settings)
    settings.pid_file.unlink(missing_ok=True)
    settings.url_file.unlink(missing_ok=True)
    if pid is None:
        return None
    _end(pid, grace_s)
    return pid


def _end(pid: int, grace_s: float) -> None:
    """SIGTERM the server's process group (it leads one: start_new_session), then SIGKILL."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        _reap(pid)
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    _reap(pid)


def _reap(pid: int) -> None:
    """Collect our own child's exit status (else it stays a zombie that kill(pid, 0) still sees)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
