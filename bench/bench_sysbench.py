"""sysbench `oltp_write_only` through the simulator's SQL front, then every replica verified.

`tidelake sim --workload none --sql-port P` and `tidelake pull` run as processes; sysbench
(Debian's 1.0.20, MySQL driver, prepared statements) prepares its tables and runs for --time
seconds; then `tidelake status` until the puller is past the end, `tidelake merge` and `tidelake
verify` (bench/_pipeline.py), which must find every sbtest replica equal to the upstream.

Measured in the same run:
  sysbench   transactions/s, queries/s, ignored errors/s (deadlocks and lock waits, which sysbench
             retries), latency avg and p95, as sysbench prints them; the 1-minute load average at
             the end of the run.
  ceiling    the same transaction (BEGIN, UPDATE k = k + 1, UPDATE c, DELETE, INSERT, COMMIT on
             random ids) run in this process on a SimTiDB through the front's statement layer
             (parse + execute), with no protocol, no gRPC servers and no puller: what the front
             itself allows, --threads threads for --ceiling-time seconds.

    .venv/bin/python bench/bench_sysbench.py [--time 60] [--threads 4] [--tables 1] [--table-size 10000]
                                             [--ceiling-time 15] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mysql_mimic.variables import GlobalVariables

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import markdown_table, print_environment, write_json  # noqa: E402
from bench._pipeline import Pipeline  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.sql import variables as sv  # noqa: E402
from tidelake.sim.sql.parse import parse  # noqa: E402
from tidelake.sim.sql.state import SessionState  # noqa: E402
from tidelake.sim.sql.statements import execute  # noqa: E402
from tidelake.sim.tidb.kvtxn import TxnConflictError  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.sim.tidb.sql_errors import SqlError  # noqa: E402


def sysbench(port: int, args: argparse.Namespace, command: str, log: Path) -> str:
    argv = ["sysbench", "oltp_write_only", "--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={port}",
            "--mysql-user=root", "--mysql-db=sbtest", f"--tables={args.tables}", f"--table-size={args.table_size}",
            f"--threads={args.threads}", f"--time={args.time}", "--report-interval=10", command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=args.time + 900)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"sysbench {command} exited {done.returncode}; see {log}")
    return done.stdout


def parse_run(out: str) -> dict:
    def number(pattern: str) -> float:
        match = re.search(pattern, out)
        return float(match.group(1)) if match else float("nan")

    return {
        "transactions": number(r"transactions:\s+(\d+)"),
        "tps": number(r"transactions:\s+\d+\s+\(([\d.]+) per sec"),
        "qps": number(r"queries:\s+\d+\s+\(([\d.]+) per sec"),
        "ignored_errors_per_s": number(r"ignored errors:\s+\d+\s+\(([\d.]+) per sec"),
        "latency_avg_ms": number(r"avg:\s+([\d.]+)"),
        "latency_p95_ms": number(r"95th percentile:\s+([\d.]+)"),
    }


def ceiling(args: argparse.Namespace) -> dict:
    """The oltp_write_only transaction on an in-process SimTiDB through parse + execute."""
    tidb = SimTiDB(SimCluster(n_stores=3, split_check_interval_s=0, gc_interval_s=0))
    globals_: GlobalVariables = sv.global_variables()

    def session() -> SessionState:
        state = SessionState(tidb, sv.session_variables(globals_), globals_)
        return state

    def run(state: SessionState, sql: str) -> None:
        for statement in parse(sql):
            execute(statement, state)

    setup = session()
    run(setup, "CREATE DATABASE sbtest")
    run(setup, "USE sbtest")
    size = min(args.table_size, 10_000)
    run(setup, "CREATE TABLE sbtest1 (id INT NOT NULL AUTO_INCREMENT, k INT NOT NULL DEFAULT 0, "
               "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id))")
    for lo in range(1, size + 1, 1000):
        values = ", ".join(f"({i}, {i}, '{'c' * 119}', '{'p' * 59}')" for i in range(lo, min(lo + 1000, size + 1)))
        run(setup, f"INSERT INTO sbtest1 (id, k, c, pad) VALUES {values}")
    run(setup, "CREATE INDEX k_1 ON sbtest1 (k)")
    done, errors = [0], [0]
    stop = time.monotonic() + args.ceiling_time
    lock = threading.Lock()

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        state = session()
        run(state, "USE sbtest")
        while time.monotonic() < stop:
            i, j = rng.randint(1, size), rng.randint(1, size)
            try:
                run(state, "BEGIN")
                run(state, f"UPDATE sbtest1 SET k = k + 1 WHERE id = {rng.randint(1, size)}")
                run(state, f"UPDATE sbtest1 SET c = '{rng.randbytes(40).hex()[:119]}' WHERE id = {i}")
                run(state, f"DELETE FROM sbtest1 WHERE id = {j}")
                run(state, f"INSERT INTO sbtest1 (id, k, c, pad) VALUES ({j}, {i}, '{'c' * 119}', '{'p' * 59}')")
                run(state, "COMMIT")
                with lock:
                    done[0] += 1
            except (SqlError, TxnConflictError):
                state.rollback()
                with lock:
                    errors[0] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    return {"seconds": round(seconds, 1), "tps": done[0] / seconds, "errors_per_s": errors[0] / seconds,
            "load_avg_1m": round(os.getloadavg()[0], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time", type=int, default=60, help="sysbench run seconds (default 60)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--tables", type=int, default=1)
    parser.add_argument("--table-size", type=int, default=10_000)
    parser.add_argument("--ceiling-time", type=float, default=15, help="seconds of the in-process ceiling (0: skip)")
    parser.add_argument("--workdir", type=Path, help="logs, lake and config (default: a temporary folder)")
    parser.add_argument("--spark-lock", type=Path, help="run merge and verify under `flock` of this file")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    missing = [tool for tool in ("sysbench", "mariadb") if shutil.which(tool) is None]
    if missing:
        print(f"error: {', '.join(missing)} not found (make sysbench installs Debian's packages)", file=sys.stderr)
        return 2
    env = print_environment()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sysbench-"))
    print(f"# logs in {workdir}/logs", flush=True)
    with Pipeline(workdir, rules=("sbtest.*",), spark_lock=args.spark_lock) as pipe:
        subprocess.run(["mariadb", "-uroot", "-h127.0.0.1", f"-P{pipe.sql_port}", "-e", "CREATE DATABASE sbtest"],
                       check=True, timeout=60)
        started = time.monotonic()
        sysbench(pipe.sql_port, args, "prepare", pipe.logs / "sysbench-prepare.log")
        prepare_s = time.monotonic() - started
        pipe.check("sysbench prepare")
        result = parse_run(sysbench(pipe.sql_port, args, "run", pipe.logs / "sysbench-run.log"))
        result["load_avg_1m"] = round(os.getloadavg()[0], 1)
        pipe.check("sysbench run")
        outcome = pipe.replicate()
    limit = ceiling(args) if args.ceiling_time > 0 else None
    print(markdown_table(
        ["measure", "tx/s", "queries/s", "ignored errors/s", "latency avg ms", "latency p95 ms", "load 1m"],
        [("sysbench through the SQL front", result["tps"], result["qps"], result["ignored_errors_per_s"],
          result["latency_avg_ms"], result["latency_p95_ms"], result["load_avg_1m"])]
        + ([("ceiling: parse + execute in process", limit["tps"], "-", limit["errors_per_s"], "-", "-",
             limit["load_avg_1m"])] if limit else [])))
    print(f"\nprepare {prepare_s:.0f} s ({args.tables} x {args.table_size} rows); replication: {outcome.replicas} "
          f"replicas, verify exit {outcome.verify_exit}, {'verified' if outcome.verified else 'NOT verified'}; "
          f"seconds {outcome.seconds}")
    if not outcome.verified:
        print(outcome.verify_tail)
    write_json(args.json, "sysbench", env, {"sysbench": result, "prepare_s": round(prepare_s, 1), "ceiling": limit,
                                            "replication": outcome.to_json(), "args": vars(args) | {
                                                "workdir": str(workdir), "spark_lock": str(args.spark_lock)}})
    return 0 if outcome.verified else 1


if __name__ == "__main__":
    sys.exit(main())
