"""`tidelake sim`: starts, prints addresses and progress, writes the info file, stops after --duration."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pymysql
import pytest

from tidelake.cli import main
from tidelake.sim import cluster as cluster_module


def test_sim_runs_for_duration_and_stops(tmp_path, capsys):
    info = tmp_path / "info.json"
    rc = main(["sim", "--stores", "2", "--workload", "smoke", "--faults", "light", "--duration", "1.5",
               "--progress-interval", "0.5", "--seed", "3", "--info-file", str(info), "--sql-port", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    data = json.loads(info.read_text())
    assert data["pd"] == [line.split(": ")[1] for line in out.splitlines() if line.startswith("pd: ")]
    assert "sql" not in data and "sql: " not in out  # --sql-port 0: no SQL front
    assert sorted(data["stores"]) == ["1", "2"]
    progress = [line for line in out.splitlines() if line.startswith("t=")]
    assert len(progress) >= 2 and "txns=" in progress[-1] and "faults=" in progress[-1]
    assert int(progress[-1].split("txns=")[1].split()[0]) > 0
    assert out.rstrip().endswith("stopped")


@pytest.mark.parametrize("argv", [["--workload", "nope"], ["--faults", "nope"], ["--stores", "0"], ["--rate", "-1"],
                                  ["--gc-life-time", "soon"], ["--preload", "-5"],
                                  ["--workload", "none", "--preload", "10"], ["--txn-mode", "serializable"],
                                  ["--sql-port", "70000"]])
def test_bad_arguments_exit_2_with_one_line(argv, capsys):
    assert main(["sim", "--duration", "1", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tidelake: error:")


def test_preload_fills_orders_before_traffic_and_reports_it(tmp_path, capsys):
    rc = main(["sim", "--stores", "1", "--workload", "smoke", "--duration", "2", "--progress-interval", "0.5",
               "--preload", "2500", "--seed", "4", "--sql-port", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "preloaded=2500/2500" in [line for line in out.splitlines() if line.startswith("t=")][-1]


def test_help_documents_presets_and_profiles(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["sim", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    for name in ("smoke", "mixed", "ddl-heavy", "bulk", "bank-optimistic", "none", "light", "chaos", "pessimistic",
                 "optimistic"):
        assert f"  {name} " in out


@pytest.mark.parametrize(("argv", "mode"), [([], "pessimistic"), (["--txn-mode", "optimistic"], "optimistic"),
                                            (["--workload", "bank-optimistic"], "optimistic"),
                                            (["--workload", "bank-optimistic", "--txn-mode", "pessimistic"],
                                             "pessimistic")])
def test_txn_mode_comes_from_the_flag_else_the_preset_else_tidb_default(argv, mode, capsys):
    argv = ["--workload", "smoke", *argv] if "--workload" not in argv else argv
    assert main(["sim", "--stores", "1", "--duration", "0.5", "--progress-interval", "5", *argv]) == 0
    assert f"txn mode: {mode}" in capsys.readouterr().out.splitlines()


def test_sigterm_stops_cleanly():
    proc = subprocess.Popen([sys.executable, "-m", "tidelake", "sim", "--stores", "1", "--workload", "smoke"],
                            stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("pd: ") and lines[1].startswith("store 1: ")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert out.rstrip().endswith("stopped")


def test_gc_life_time_reaches_the_cluster(monkeypatch, capsys):
    seen = {}

    class Recording(cluster_module.SimCluster):
        def __init__(self, **kw):
            seen.update(kw)
            super().__init__(**kw)

    monkeypatch.setattr(cluster_module, "SimCluster", Recording)
    assert main(["sim", "--duration", "0.5", "--workload", "none", "--gc-life-time", "2h"]) == 0
    assert seen["gc_life_time_s"] == 7200


def test_sql_port_serves_mysql_beside_pd_and_a_busy_one_is_one_line(tmp_path, capsys):
    """`--sql-port P` prints `sql: host:P` after PD and the stores and writes it to the info file;
    a port already taken stops the simulator with one line naming it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    info = tmp_path / "info.json"
    answers: list = []

    def client() -> None:
        deadline = time.monotonic() + 20
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        conn = pymysql.connect(host="127.0.0.1", port=port, user="root", autocommit=True)
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE d")
            cursor.execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
            cursor.execute("INSERT INTO d.t VALUES (1), (2)")
            cursor.execute("SELECT COUNT(*) FROM d.t")
            answers.append(cursor.fetchall())
        conn.close()

    thread = threading.Thread(target=client)
    thread.start()
    rc = main(["sim", "--stores", "1", "--workload", "none", "--duration", "4", "--sql-port", str(port),
               "--info-file", str(info)])
    thread.join()
    out = capsys.readouterr().out.splitlines()
    assert rc == 0 and answers == [((2,),)]
    assert json.loads(info.read_text())["sql"] == f"127.0.0.1:{port}"
    assert [line.split(":")[0] for line in out[:3]] == ["pd", "store 1", "sql"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        assert main(["sim", "--stores", "1", "--workload", "none", "--duration", "1", "--sql-port", str(port)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tidelake: error: SQL: cannot listen on 127.0.0.1:{port} (Address already in use; --sql-port "
                   "picks another port, 0 turns the SQL front off)"]


def test_without_sql_port_a_taken_4000_falls_back_to_a_free_port(capsys):
    """The default is TiDB's 4000; when something else has it the simulator still starts (demos and
    tests run `tidelake sim` side by side) and says where SQL is served instead."""
    with socket.socket() as holder:
        try:
            holder.bind(("127.0.0.1", 4000))
            holder.listen()
        except OSError:
            pass  # already taken by someone else: the same situation
        assert main(["sim", "--stores", "1", "--workload", "none", "--duration", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "sql: 127.0.0.1:4000 is taken; serving on port" in out
