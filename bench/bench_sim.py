"""Simulator write throughput: how much load `tidelake sim` can put on a puller, per workload preset.

Three measurements in one process and one run:
  presets   WorkloadRunner.run_ops over each preset's seeded statement stream (planning + SimTiDB
            DML + Percolator 2PC through MvccStore; DDL and lock-holding txns included as the
            preset plans them), after the preset's setup DDL; txn/s and rows/s.
  ceiling   MvccStore.prewrite + commit of the same number of rows, 10 rows per txn, values of the
            preset-typical size, no row encoding or statement layer: the store's own limit.
  big txn   one transaction of --big-rows inserts through SimTiDB: time to run the statements,
            then the 2PC commit (prewrite of every key, then commit), as a 100k-row txn of TiDB.

    .venv/bin/python bench/bench_sim.py [--ops 300] [--presets smoke,hot,mixed,ddl-heavy]
                                         [--big-rows 100000] [--seed 0] [--json out.json]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, markdown_table, print_environment, write_json  # noqa: E402
from tidelake.codec.keys import record_key  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.sim.workload import WorkloadRunner, get_preset  # noqa: E402

SETUP_OPS = 20  # a preset's CREATE DATABASE/TABLE statements come first; run them untimed
CEILING_TXN_ROWS = 10
CEILING_VALUE_BYTES = 120


def _cluster(seed: int) -> SimCluster:
    # No background split checker or GC: they would add noise that is not the write path.
    return SimCluster(n_stores=3, seed=seed, split_check_interval_s=0, gc_interval_s=0)


def bench_preset(name: str, ops: int, seed: int) -> dict:
    with _cluster(seed) as cluster:
        runner = WorkloadRunner(SimTiDB(cluster), name, seed=seed)
        runner.run_ops(SETUP_OPS)
        before = runner.counters.snapshot()
        with Timer() as timer:
            runner.run_ops(ops)
            runner.stop()  # lock-holding txns commit early; their rows count, their hold time does not
        after = runner.counters.snapshot()
    seconds = timer.wall_s
    delta = {k: after[k] - before[k] for k in ("txns", "rows", "ddls", "conflicts", "errors")}
    return {"preset": name, "seconds": seconds, "cpu_share": timer.cpu_share, **delta,
            "txn_per_s": delta["txns"] / seconds, "rows_per_s": delta["rows"] / seconds}


def bench_mvcc_ceiling(rows: int, seed: int) -> dict:
    rng = random.Random(seed)
    value = rng.randbytes(CEILING_VALUE_BYTES)
    with _cluster(seed) as cluster:
        tso, mvcc = cluster.tso, cluster.mvcc
        with Timer() as timer:
            for first in range(0, rows, CEILING_TXN_ROWS):
                keys = [record_key(500, h) for h in range(first, min(first + CEILING_TXN_ROWS, rows))]
                start_ts = tso.next()
                mvcc.prewrite([("put", k, value) for k in keys], keys[0], start_ts, 3000)
                mvcc.commit(keys, start_ts, tso.next())
    seconds = timer.wall_s
    return {"rows": rows, "seconds": seconds, "cpu_share": timer.cpu_share, "rows_per_s": rows / seconds,
            "txn_per_s": rows / CEILING_TXN_ROWS / seconds}


def bench_big_txn(rows: int, seed: int) -> dict:
    with _cluster(seed) as cluster:
        tidb = SimTiDB(cluster)
        tidb.create_database("bench")
        tidb.create_table("bench", "big", [("id", "bigint", "pk"), ("customer", "int"),
                                            ("amount", "decimal(12,2)"), ("note", "varchar(64)")])
        txn = tidb.txn()
        started = time.perf_counter()
        for i in range(rows):
            txn.insert("bench", "big", {"id": i, "customer": i * 7919 % 100_000, "amount": i % 100_000,
                                        "note": f"bulk row {i} seed {seed}"})
        statements = time.perf_counter() - started
        txn.prewrite()
        prewritten = time.perf_counter() - started
        txn.commit()
        total = time.perf_counter() - started
    return {"rows": rows, "statements_s": statements, "prewrite_s": prewritten - statements,
            "commit_s": total - prewritten, "total_s": total, "rows_per_s": rows / total}


def run(presets: list[str], ops: int, big_rows: int, seed: int) -> dict:
    for name in presets:
        get_preset(name)  # unknown names fail before anything runs
    results = [bench_preset(name, ops, seed) for name in presets]
    ceiling_rows = max([r["rows"] for r in results] + [1000])
    ceiling = bench_mvcc_ceiling(ceiling_rows, seed)
    print(f"\n## Simulator write throughput ({ops} statements per preset after setup, seed {seed})\n")
    print(markdown_table(
        ["preset", "txns", "rows", "DDLs", "conflicts", "errors", "wall s", "cpu share", "txn/s", "rows/s",
         "rows/s vs MVCC"],
        [[r["preset"], r["txns"], r["rows"], r["ddls"], r["conflicts"], r["errors"], r["seconds"], r["cpu_share"],
          r["txn_per_s"], r["rows_per_s"], r["rows_per_s"] / ceiling["rows_per_s"]] for r in results]
        + [[f"MVCC 2PC ceiling ({CEILING_TXN_ROWS} rows/txn)", int(ceiling["txn_per_s"] * ceiling["seconds"]),
            ceiling["rows"], 0, 0, 0, ceiling["seconds"], ceiling["cpu_share"], ceiling["txn_per_s"],
            ceiling["rows_per_s"], 1.0]]))
    big = bench_big_txn(big_rows, seed) if big_rows else None
    if big:
        print(f"\n## One {big_rows:,}-row transaction through SimTiDB\n")
        print(markdown_table(["rows", "statements s", "prewrite s", "commit s", "total s", "rows/s"],
                             [[big["rows"], big["statements_s"], big["prewrite_s"], big["commit_s"],
                               big["total_s"], big["rows_per_s"]]]))
    return {"presets": results, "mvcc_ceiling": ceiling, "big_txn": big}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300, help="statements per preset after its setup")
    parser.add_argument("--presets", default="smoke,hot,mixed,ddl-heavy")
    parser.add_argument("--big-rows", type=int, default=100_000, help="rows of the big transaction (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    results = run([p for p in args.presets.split(",") if p], args.ops, args.big_rows, args.seed)
    write_json(args.json, "sim", env, results)
    return results


if __name__ == "__main__":
    main()
