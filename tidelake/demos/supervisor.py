"""Child processes of the Airflow demo: each in its own session with a log, stopped with its tree.

A demo stage waits on a condition while its children's checks run every round, so a crashed
process fails the stage at once with its log named, not at the stage's deadline.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tidelake.errors import InputError, TidelakeError
from tidelake.wait import WaitTimeout, wait_until


class StageFailed(TidelakeError):
    """A demo stage did not finish: names the stage and the log to read."""

    def __init__(self, stage: str, message: str, log: Path | None = None) -> None:
        where = f" (log: {log})" if log is not None else ""
        super().__init__(f"stage '{stage}' failed: {message}{where}")
        self.stage = stage


class Child:
    """A child process in its own session, output to a log file; stopped with its whole tree."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.log = log
        self._out = log.open("ab")
        self.process = subprocess.Popen(command, stdout=self._out, stderr=subprocess.STDOUT, env=env,
                                        cwd=cwd, start_new_session=True)

    def check(self, stage: str) -> None:
        code = self.process.poll()
        if code is not None:
            raise StageFailed(stage, f"{self.name} exited with code {code}", self.log)

    def tree(self) -> list[Any]:
        """This process and every descendant now."""
        import psutil  # an Airflow dependency: only the Airflow demos supervise processes

        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, grace_s: float = 60.0) -> None:
        stop_tree(self.tree(), grace_s)
        self.process.wait(timeout=10)
        self._out.close()

    def kill(self) -> int:
        """SIGKILL this process and every descendant at once, as a machine or container loss ends
        them (nothing runs a handler); how many processes were killed."""
        import psutil  # see tree

        processes = self.tree()
        for proc in processes:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=10)
        self.process.wait(timeout=10)
        self._out.close()
        return len(processes)


def stop_tree(processes: list[Any], grace_s: float) -> None:
    """SIGTERM the root (it shuts its children down in order), then SIGTERM what is left of the
    tree as it was, then SIGKILL: nothing from the tree outlives this call."""
    import psutil  # see Child.tree

    def signal_all(procs: list[Any], sig: int) -> None:
        for proc in procs:
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                pass

    if not processes:
        return
    signal_all(processes[:1], signal.SIGTERM)
    psutil.wait_procs(processes[:1], timeout=grace_s)
    left = [p for p in processes if p.is_running()]
    signal_all(left, signal.SIGTERM)
    _, left = psutil.wait_procs(left, timeout=10)
    signal_all(left, signal.SIGKILL)
    psutil.wait_procs(left, timeout=10)


def await_stage(stage: str, ready: Callable[[], Any], timeout_s: float, log: Path | None,
                checks: Iterable[Callable[[str], None]] = (), interval_s: float = 2.0,
                waiting: Callable[[], str] | None = None) -> Any:
    """The first truthy `ready()`; every round runs the children's checks first (see module doc)."""
    checks = list(checks)

    def check() -> None:
        for child_check in checks:
            child_check(stage)

    try:
        return wait_until(ready, timeout_s, stage, check=check, interval_s=interval_s, waiting=waiting)
    except WaitTimeout as exc:
        raise StageFailed(stage, str(exc), log) from None


def accepting(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def free_port(preferred: int) -> int:
    """`preferred` if nothing listens there, else any free port (another Airflow may own 8080)."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise InputError("no free TCP port for the Airflow UI")


def exit_code(name: str, body: Callable[[], int]) -> int:
    """Run a demo's `body`: bad input is one line and 2, a failed stage one line (stage, log) and
    1, Ctrl-C 130; anything else is a bug and keeps its traceback."""
    try:
        return body()
    except InputError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        return 2
    except StageFailed as exc:
        print(f"{name} failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{name} interrupted", file=sys.stderr)
        return 130
