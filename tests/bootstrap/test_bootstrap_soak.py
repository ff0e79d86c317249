"""Bootstrap acceptance, every step a real `tidelake` process as a user runs it:

a simulated cluster under a live seeded workload and faults whose `orders` table already holds
TIDELAKE_SOAK_ROWS rows; `tidelake bootstrap` SIGKILLed mid-read, the puller started, bootstrap
rerun; then rounds of `tidelake merge` + `tidelake verify` (each replica against the upstream
read at its own checkpoint), with a table added to the running changefeed in the middle, while
the other tables keep advancing and the puller keeps running.

    TIDELAKE_SOAK_ROWS=1000000 .venv/bin/python -m pytest -m slow tests/bootstrap/test_bootstrap_soak.py
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidelake.config_writer import changefeed_document, write_config
from tidelake.demos.supervisor import Child, await_stage
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState

pytestmark = pytest.mark.slow

ROWS = int(os.environ.get("TIDELAKE_SOAK_ROWS", "60000"))
FAULTS = os.environ.get("TIDELAKE_SOAK_FAULTS", "light")
ROUNDS = int(os.environ.get("TIDELAKE_SOAK_ROUNDS", "3"))
RATE = os.environ.get("TIDELAKE_SOAK_RATE", "10")
MASTER = "local[2]"
ADDED = "sim.accounts"  # outside the filter at first; added to the running changefeed


def tidelake(*args: str) -> list[str]:
    return [sys.executable, "-m", "tidelake", *args]


def run(logs: Path, name: str, *args: str, timeout_s: float = 1800) -> str:
    """Run one command to completion; its output is kept in logs/<name>.log."""
    started = time.monotonic()
    try:
        done = subprocess.run(tidelake(*args), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        parts = [p.decode(errors="replace") if isinstance(p, bytes) else p for p in (exc.stdout, exc.stderr) if p]
        partial = "".join(parts)
        (logs / f"{name}.log").write_text(partial)
        pytest.fail(f"{name} did not finish in {timeout_s:.0f}s; its output so far is in {logs / name}.log")
    output = done.stdout + done.stderr
    (logs / f"{name}.log").write_text(output)
    print(f"{name}: exit {done.returncode} in {time.monotonic() - started:.0f}s", flush=True)
    assert done.returncode == 0, f"{name} failed:\n{output[-4000:]}"
    return output


def kill_tree(child: Child) -> None:
    """SIGKILL the process and everything it started (Spark's JVM and Python workers)."""
    for proc in reversed(child.tree()):
        proc.send_signal(signal.SIGKILL)
    child.process.wait(timeout=30)


def checkpoints(layout: LakeLayout) -> dict[str, int]:
    """Checkpoint of every live replica (dropped tables stay behind; no table may be stopped)."""
    found = {}
    entries = ReplicaCatalog(layout).entries().values()
    stopped = [f"{e.db}.{e.name}: {e.reason}" for e in entries if e.state == ReplicaState.STOPPED]
    assert not stopped, f"replicas stopped: {stopped}"
    for entry in entries:
        if entry.state != ReplicaState.ACTIVE:
            continue
        ts = read_checkpoint(entry.path)
        if ts is not None:
            found[f"{entry.db}.{entry.name}"] = ts
    return found


def changefeed_doc(pd: str, lake: Path) -> dict:
    return changefeed_document("soak", [pd], lake, rules=["sim.*", f"!{ADDED}"], gc_ttl="1h",
                               puller={"flush_interval": "500ms"})


def test_bootstrap_of_loaded_tables_under_workload_and_faults_verifies_at_every_checkpoint(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    print(f"soak: {ROWS} preloaded rows, faults {FAULTS}, {ROUNDS} merge rounds; logs in {logs}", flush=True)
    info = tmp_path / "cluster.json"
    sim = Child("sim", tidelake("sim", "--stores", "3", "--workload", "mixed", "--rate", RATE, "--faults", FAULTS,
                                "--seed", "11", "--preload", str(ROWS), "--info-file", str(info),
                                "--gc-life-time", "2h", "--progress-interval", "2"), logs / "sim.log")
    children = [sim]
    try:
        await_stage("preload", lambda: f"preloaded={ROWS}/{ROWS}" in sim.log.read_text(), 120 + ROWS / 2000,
                 sim.log, checks=[sim.check])
        lake = tmp_path / "lake"
        layout = LakeLayout(str(lake))
        config = write_config(tmp_path / "changefeed.toml", changefeed_doc(json.loads(info.read_text())["pd"][0], lake))
        boot_args = ("bootstrap", "--config", str(config), "--spark-master", MASTER)

        killed = Child("bootstrap-killed", tidelake(*boot_args), logs / "bootstrap-killed.log")
        children.append(killed)
        await_stage("bootstrap reading orders", lambda: "bootstrap sim.orders: reading" in killed.log.read_text(), 900,
                 killed.log, checks=[killed.check, sim.check], interval_s=0.5)
        time.sleep(2)  # inside the Spark job that reads and writes the replica
        kill_tree(killed)
        assert "sim.orders: replica written" not in killed.log.read_text(), "the kill came after the write"
        children.remove(killed)
        assert "sim.orders" not in checkpoints(layout), "a replica killed mid-read claims a checkpoint"

        puller = Child("puller", tidelake("pull", "--config", str(config), "--progress-interval", "10"),
                       logs / "puller.log")
        children.append(puller)
        out = run(logs, "bootstrap-rerun", *boot_args)
        assert re.search(r"bootstrap sim\.orders: replica written at checkpoint \d+ \(spark\)", out), out[-3000:]
        first = checkpoints(layout)
        assert "sim.orders" in first and ADDED not in first
        run(logs, "verify-bootstrap", "verify", "--config", str(config))

        previous = first
        for round_no in range(1, ROUNDS + 1):
            time.sleep(20)  # workload, DDL and faults in between
            if round_no == 2:
                out = run(logs, "bootstrap-add", *boot_args, "--table", ADDED)
                assert f"bootstrap {ADDED}: replica written at checkpoint" in out, out[-3000:]
            puller.check(f"round {round_no}")
            run(logs, f"merge-{round_no}", "merge", "--config", str(config), "--master", MASTER)
            run(logs, f"verify-{round_no}", "verify", "--config", str(config))
            now = checkpoints(layout)
            kept = set(previous) & set(now)
            stuck = sorted(t for t in kept if now[t] <= previous[t])
            assert not stuck, f"round {round_no}: checkpoints did not advance for {stuck}"
            assert "sim.orders" in now
            print(f"round {round_no}: {len(now)} replicas verified at their checkpoints", flush=True)
            previous = now
        assert ADDED in previous
        puller.check("end")
    finally:
        for child in reversed(children):
            child.stop(grace_s=60)
