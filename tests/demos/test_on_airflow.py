"""`make demo` pieces without running the whole thing: the files it writes, the Airflow
environment, stage deadlines, and that stopping a child leaves no process of its tree behind.
The whole run is the slow test at the end."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from tidelake.config import load_config
from tidelake.demos.on_airflow import (
    PASSWORDS_FILE,
    REPO,
    AirflowDemoOptions,
    DemoPaths,
    airflow_env,
    run,
    write_demo_changefeed,
)
from tidelake.demos.supervisor import Child, StageFailed, await_stage, free_port


def test_the_changefeed_starts_before_the_simulator_and_takes_syncpoints(tmp_path):
    paths = DemoPaths(tmp_path)
    write_demo_changefeed(paths.config, "127.0.0.1:2379", paths.lake, 450_000_000_000_000_000, "1m")
    config = load_config(paths.config)
    assert config.start_ts == 450_000_000_000_000_000
    assert config.upstream.pd == ("127.0.0.1:2379",)
    assert config.lake.root == str(paths.lake)
    assert config.filter.table_filter().should_replicate_table("demo", "orders")
    assert not config.filter.table_filter().should_replicate_table("other", "orders")
    assert not config.filter.table_filter().should_replicate_table("demo", "t_12")  # workload scratch tables
    assert config.merge.syncpoint_interval_s == 60 and config.merge.parallel_jobs == 1
    assert config.spark.remote is None  # --cold-spark: spark-submit per merge task
    assert config.merge.run_on_new_data_s is None  # --schedule-only
    write_demo_changefeed(paths.config, "127.0.0.1:2379", paths.lake, 450_000_000_000_000_000, "1m",
                          remote="sc://127.0.0.1:15002", run_on_new_data="15s")
    assert load_config(paths.config).spark.remote == "sc://127.0.0.1:15002"
    assert load_config(paths.config).merge.run_on_new_data_s == 15


def test_airflow_env_points_at_the_demo_dags_the_workdir_and_a_local_spark(tmp_path):
    paths = DemoPaths(tmp_path)
    env = airflow_env(paths, 8181, base={"PATH": "/usr/bin", "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
                                               "AIRFLOW_CONN_WAREHOUSE": "postgres://x", "SPARK_REMOTE": "sc://x",
                                               "TIDELAKE_CONFIG": "/elsewhere.toml"})
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor" and "AIRFLOW_CONN_WAREHOUSE" not in env  # nothing inherited
    assert "SPARK_REMOTE" not in env  # the demo's changefeed config names its Spark
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == str(paths.airflow_home / PASSWORDS_FILE)
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(paths.dags_folder)  # the demo writes its DAG file there
    assert not Path(env["AIRFLOW__CORE__PLUGINS_FOLDER"]).exists()  # the plugin comes from the entry point
    assert env["AIRFLOW_HOME"] == str(paths.airflow_home)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith(f"sqlite:///{paths.airflow_home}")
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://localhost:8181/execution/"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert "TIDELAKE_CONFIG" not in env  # the Replication page reads the config source from the serialized DAGs
    assert '"local[*]"' in env["AIRFLOW_CONN_SPARK_DEFAULT"]
    assert shutil.which("spark-submit", path=env["PATH"]) is not None  # docs/stack.md#apache-airflow-providers-apache-spark-634
    # Airflow's processes import this checkout's tidelake, not whichever the venv's editable install names
    where = subprocess.run([sys.executable, "-c", "import tidelake; print(tidelake.__file__)"], env=env,
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().parent == REPO / "tidelake"


def test_reset_removes_only_the_demos_own_files(tmp_path):
    (tmp_path / "lake" / "old").mkdir(parents=True)
    (tmp_path / "changefeed.toml").write_text("x")
    (tmp_path / "notes.txt").write_text("mine")
    DemoPaths(tmp_path).reset()
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "lake" / "old").exists() and not (tmp_path / "changefeed.toml").exists()
    assert (tmp_path / "logs").is_dir() and (tmp_path / "airflow_home").is_dir()


def test_a_busy_port_gives_another_free_one():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        busy = sock.getsockname()[1]
        other = free_port(busy)
    assert other != busy and other > 0


def test_a_stage_that_times_out_names_itself_and_its_log(tmp_path):
    with pytest.raises(StageFailed) as err:
        await_stage("airflow startup", lambda: False, 0.2, tmp_path / "airflow.log", interval_s=0.05,
                 waiting=lambda: "scheduler not healthy")
    assert "stage 'airflow startup' failed: timed out after 0s waiting for airflow startup: scheduler not healthy" in str(err.value)
    assert str(tmp_path / "airflow.log") in str(err.value)


def test_a_crashed_child_fails_the_stage_at_once_with_its_log(tmp_path):
    child = Child("tidelake sim", [sys.executable, "-c", "print('boom'); raise SystemExit(3)"], tmp_path / "sim.log")
    child.process.wait(30)
    started = time.monotonic()
    with pytest.raises(StageFailed) as err:
        await_stage("simulator", lambda: False, 60, child.log, [child.check], interval_s=0.05)
    assert time.monotonic() - started < 5
    assert "tidelake sim exited with code 3" in str(err.value)
    assert "boom" in child.log.read_text()
    child.stop()


# A parent whose grandchild sits in its own session and ignores SIGTERM, like a task process
# and its spark-submit JVM: terminating the parent alone would orphan it.
TREE = textwrap.dedent("""
    import subprocess, sys, time
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", stubborn], start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(600)
""")


def test_stopping_a_child_stops_its_whole_tree(tmp_path):
    child = Child("tree", [sys.executable, "-c", TREE], tmp_path / "tree.log")
    deadline = time.monotonic() + 60
    while not child.log.read_text().strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    grandchild = int(child.log.read_text().split()[0])
    assert psutil.pid_exists(grandchild)
    child.stop(grace_s=2)
    assert child.process.poll() is not None
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_make_demo_end_to_end(tmp_path, capsys):
    """The whole Airflow path; 10-20 minutes on a busy 2-core machine."""
    code = run(AirflowDemoOptions(workdir=tmp_path, traffic_s=30, port=free_port(8080)))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "all replicas match upstream" in out
    assert "login: admin / " in out
    leftovers = [p for p in psutil.process_iter(["cmdline"])
                 if any(str(tmp_path) in part for part in (p.info["cmdline"] or []))]
    assert leftovers == []


@pytest.mark.slow
def test_sigterm_during_startup_stops_every_demo_process(tmp_path):
    """A CI timeout or `kill` ends the demo like Ctrl-C: its children (own sessions) go with it."""
    import signal
    import subprocess

    demo = subprocess.Popen([sys.executable, "-m", "tidelake.demos.on_airflow", "--workdir", str(tmp_path),
                             "--port", str(free_port(8080))], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (tmp_path / "changefeed.toml").exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(5)  # airflow standalone is starting
    mine = [p for p in psutil.process_iter(["cmdline", "environ"])
            if any(str(tmp_path) in part for part in (p.info["cmdline"] or []))
            or str(tmp_path) in (p.info["environ"] or {}).get("AIRFLOW_HOME", "")]
    assert any("sim" in p.info["cmdline"] for p in mine)
    assert any("standalone" in p.info["cmdline"] for p in mine)
    demo.send_signal(signal.SIGTERM)
    out = demo.communicate(timeout=300)[0].decode()
    assert demo.returncode == 130 and "all demo processes stopped" in out, out
    assert not [p for p in mine if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_airflow_env_takes_a_metadata_database_url_and_a_spark_master(tmp_path):
    url = "postgresql+psycopg2://airflow@127.0.0.1:5433/airflow"
    env = airflow_env(DemoPaths(tmp_path), 8181, base={"PATH": "/usr/bin"}, sql_alchemy_conn=url,
                      spark_master="spark://127.0.0.1:7077")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == url
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert (spark["conn_type"], spark["host"]) == ("spark", "spark://127.0.0.1:7077")
    assert spark["extra"]["spark_conf"]["spark.cores.max"] == "2" and "spark_jars_dir" not in spark["extra"]
    assert json.loads(env["AIRFLOW_CONN_SPARK_BOOTSTRAP"]) == spark  # the bootstrap's, also spark-submit


def test_a_warm_spark_is_a_spark_connect_connection_and_the_bootstrap_stays_classic(tmp_path):
    env = airflow_env(DemoPaths(tmp_path), 8181, base={"PATH": "/usr/bin"}, spark_remote="sc://127.0.0.1:15002")
    assert json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"]) == {"conn_type": "spark_connect", "host": "sc://127.0.0.1:15002"}
    assert json.loads(env["AIRFLOW_CONN_SPARK_BOOTSTRAP"])["conn_type"] == "spark"
    assert not [name for name in env if name.startswith("TIDELAKE_")]


def test_the_page_check_refuses_a_changefeed_the_page_cannot_read():
    """The demo's page check passes only when the JSON reports the demo's changefeed without an
    error line (the page finds it from the serialized puller DAG, not TIDELAKE_CONFIG)."""
    from tidelake.demos.on_airflow import CHANGEFEED_ID, _check_replication_page

    class Api:
        def __init__(self, reports):
            self.reports = reports

        def get_page(self, path):
            if path.endswith("/api/status"):
                return 200, json.dumps(self.reports)
            return 200, "".join(f"<h2>Changefeed {r['changefeed']}</h2>" for r in self.reports)

    said = []
    _check_replication_page(Api([{"changefeed": CHANGEFEED_ID, "tables": []}]), said.append)
    assert said
    broken = {"changefeed": CHANGEFEED_ID, "error": f"changefeed {CHANGEFEED_ID!r}: DAG 'tidelake_puller__demo': x"}
    with pytest.raises(StageFailed, match="tidelake_puller__demo"):
        _check_replication_page(Api([broken]), said.append)
