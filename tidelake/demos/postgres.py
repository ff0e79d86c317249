"""A throwaway PostgreSQL cluster on loopback: the Airflow metadata database of `make integration`
(and, in a database of its own, the Iceberg catalog it publishes the replicas to).

The server is Debian's postgresql package (binaries under /usr/lib/postgresql/<major>/bin; the
Makefile target `postgres` installs it when missing). `initdb` refuses to run as root, so as root
the cluster is created and run as the package's `postgres` user (runuser); otherwise as the
current user. Trust authentication on 127.0.0.1 only, a unix socket in the cluster's own folder,
stopped with `pg_ctl stop` and then by the postmaster's pid.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tidelake.demos.supervisor import StageFailed, await_stage, free_port
from tidelake.errors import InputError

DATABASE = "airflow"
USER = "airflow"
SERVICE_USER = "postgres"  # created by Debian's postgresql-common


def database_url(port: int, database: str = DATABASE) -> str:
    """SQLAlchemy URL of a database (the Airflow one by default) on 127.0.0.1:port (psycopg2 driver)."""
    return f"postgresql+psycopg2://{USER}@127.0.0.1:{port}/{database}"


def postgres_bin() -> Path:
    """The newest installed PostgreSQL's bin folder."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parent.parent.name))
    if not found:
        raise InputError("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): "
                         "apt-get install postgresql")
    return Path(found[-1]).parent


class Postgres:
    """One PostgreSQL cluster in `workdir` (as root: a new folder in the temp dir), listening on
    127.0.0.1:port; its log is `log`."""

    def __init__(self, workdir: Path | None = None, port: int = 0) -> None:
        self._as_service_user = os.geteuid() == 0
        # As root the folder is a new one in the temp dir: the service user must reach it, and
        # the caller's folders (a mkdtemp, a home) are often closed to other users.
        self.workdir = Path(tempfile.mkdtemp(prefix="tidelake-postgres-")) if workdir is None or self._as_service_user \
            else workdir
        self.data = self.workdir / "data"
        self.log = self.workdir / "postgres.log"
        self.port = port or free_port(0)
        self.bin = postgres_bin()

    @property
    def url(self) -> str:
        return database_url(self.port)

    def start(self, timeout_s: float = 60.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log.touch()  # one log for the tools' output and the server's, written by both users
        if self._as_service_user:
            owner = pwd.getpwnam(SERVICE_USER)
            for path in (self.workdir, self.log):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", USER, "--auth=trust", "--encoding=UTF8", "--no-sync")
        self._pg_ctl("start", timeout_s)
        self.create_database(DATABASE)

    def restart(self, timeout_s: float = 60.0) -> None:
        """`pg_ctl restart -m fast`, as an operator or a failover does: every session is ended, the
        server comes back on the same port with the same data."""
        self._pg_ctl("restart", timeout_s, "-m", "fast")

    def _pg_ctl(self, action: str, timeout_s: float, *extra: str) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.workdir} -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, *extra, "-w", "-t",
                  str(int(timeout_s)), action)
        await_stage("postgres", self._ready, timeout_s, self.log, interval_s=0.5)

    def create_database(self, name: str) -> str:
        """A new empty database of the running cluster; its SQLAlchemy URL."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return database_url(self.port, name)

    def pid(self) -> int | None:
        """The postmaster's pid (first line of postmaster.pid), None when it is not running."""
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        """`pg_ctl stop` (fast: ends sessions), then wait for the postmaster's pid to end and
        SIGKILL it if it has not."""
        import psutil  # an Airflow dependency: only the Airflow demo uses this

        pid = self.pid()
        if pid is None:
            return
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)
        try:
            postmaster = psutil.Process(pid)
            postmaster.wait(timeout=15)
        except psutil.NoSuchProcess:
            return
        except psutil.TimeoutExpired:
            postmaster.kill()
            postmaster.wait(timeout=10)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _ready(self) -> bool:
        return self._run("pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False) == 0

    def _run(self, tool: str, *args: str, check: bool = True) -> int:
        command = [str(self.bin / tool), *args]
        if self._as_service_user:
            command = ["runuser", "-u", SERVICE_USER, "--", *command]
        with self.log.open("ab") as out:
            code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir).returncode
        if check and code != 0:
            raise StageFailed("postgres", f"{tool} exited with code {code}", self.log)
        return code
