"""The supervisor of `make integration`'s Airflow components: a killed component goes with its whole
tree and comes back on restart, one that exits on its own is started again with a line, and a
restart loop fails the stage naming the component's log."""

from __future__ import annotations

import sys
import time

import psutil
import pytest

from tidelake.demos import airflow_components
from tidelake.demos.airflow_components import COMPONENTS, MAX_RESTARTS, AirflowComponents
from tidelake.demos.supervisor import StageFailed

# A fake `airflow` CLI: `db migrate` exits with $MIGRATE_CODE, a component starts a child and
# runs until killed, unless its name is in the file $EXITS (then it exits with 4 at once).
FAKE_AIRFLOW = """
import os, subprocess, sys, time
if sys.argv[1] == "db":
    sys.exit(int(os.environ.get("MIGRATE_CODE", "0")))
if sys.argv[1] in open(os.environ["EXITS"]).read().split():
    sys.exit(4)
subprocess.Popen(["sleep", "600"])
time.sleep(600)
"""


def components(tmp_path, lines: list[str], migrate_code: int = 0) -> AirflowComponents:
    cli = tmp_path / "airflow.py"
    cli.write_text(FAKE_AIRFLOW)
    (tmp_path / "exits").write_text("")
    env = {"EXITS": str(tmp_path / "exits"), "MIGRATE_CODE": str(migrate_code), "PATH": "/usr/bin:/bin"}
    return AirflowComponents([sys.executable, str(cli)], tmp_path, env, tmp_path, lines.append)


def await_children(parent: int) -> list[psutil.Process]:
    deadline = time.monotonic() + 10
    while not psutil.Process(parent).children() and time.monotonic() < deadline:
        time.sleep(0.05)
    return psutil.Process(parent).children()


def test_a_killed_component_dies_with_its_tree_and_comes_back_on_restart(tmp_path, monkeypatch):
    monkeypatch.setattr(airflow_components, "RESTART_PAUSE_S", 0)
    lines: list[str] = []
    airflow = components(tmp_path, lines)
    try:
        airflow.start()
        assert set(airflow.children) == set(COMPONENTS)
        old = airflow.pid("scheduler")
        task = await_children(old)[0]
        pid, died = airflow.kill("scheduler")
        assert (pid, died) == (old, 2)
        assert not psutil.pid_exists(old) and not task.is_running()
        airflow.check("running")  # a killed component is the caller's to restart, not the supervisor's
        assert "scheduler" not in airflow.children and lines == []
        new = airflow.restart("scheduler")
        assert new != old and psutil.Process(new).is_running()
    finally:
        airflow.stop()
    assert airflow.children == {}


def test_a_component_that_exits_is_started_again_until_it_loops(tmp_path, monkeypatch):
    monkeypatch.setattr(airflow_components, "RESTART_PAUSE_S", 0)
    lines: list[str] = []
    airflow = components(tmp_path, lines)
    try:
        airflow.start()
        (tmp_path / "exits").write_text("triggerer")
        airflow.children["triggerer"].kill()
        for restart in range(1, MAX_RESTARTS + 1):
            airflow.children["triggerer"].process.wait(timeout=10)
            airflow.check("merge past the target")
            assert lines[-2].startswith("airflow triggerer (pid ") and "the supervisor starts it again" in lines[-2]
            assert lines[-1].startswith("airflow triggerer started again: pid ")
            assert airflow.restarts["triggerer"] == restart
        airflow.children["triggerer"].process.wait(timeout=10)
        with pytest.raises(StageFailed, match=rf"stage 'merge past the target' failed: airflow triggerer exited "
                                              rf"with code 4 {MAX_RESTARTS + 1} times \(log: .*airflow-triggerer.log\)"):
            airflow.check("merge past the target")
    finally:
        airflow.stop()


def test_a_failed_migration_fails_the_startup_naming_its_log(tmp_path):
    airflow = components(tmp_path, [], migrate_code=1)
    with pytest.raises(StageFailed, match=r"stage 'airflow startup' failed: airflow db migrate exited with code 1 "
                                          r"\(log: .*airflow-db-migrate.log\)"):
        airflow.start()
    assert airflow.children == {}


def test_a_component_alive_but_not_heartbeating_is_killed_and_started_again(tmp_path, monkeypatch):
    """After a lost database connection the scheduler waits, alive, for its running tasks: only
    Airflow's health says it is gone, as a liveness probe reads it."""
    monkeypatch.setattr(airflow_components, "RESTART_PAUSE_S", 0)
    monkeypatch.setattr(airflow_components, "LIVENESS_GRACE_S", 0)
    lines: list[str] = []
    airflow = components(tmp_path, lines)
    try:
        airflow.start()
        old, triggerer = airflow.pid("scheduler"), airflow.pid("triggerer")
        airflow.liveness = lambda: {"scheduler": False, "triggerer": True}
        airflow.check("merge past the target")
        assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE
        assert airflow.pid("scheduler") != old and airflow.pid("triggerer") == triggerer
        assert "is alive but not heartbeating" in lines[0] and lines[1].startswith("airflow scheduler started again")
        airflow.liveness = dict  # the API did not answer: no verdict, nothing killed
        airflow.check("merge past the target")
        assert len(lines) == 2
    finally:
        airflow.stop()
