"""Merge throughput: changelog rows merged per second into a replica, against a plain Delta append.

The lake is made the production way: a SimCluster + SimTiDB table `bench.orders`, the real
PullerRunner (in this process) landing the changes; row values are the codec's row-v2 encoding of
seeded rows (encode_row, byte for byte what TiDB writes), committed with Percolator 2PC in
--txn-rows row transactions straight into MVCC (SimTiDB's statement layer would make the setup,
not the merge, the slow part). Two rounds:
  round 1  --rows inserts, then `run_merge` (creates the replica; Spark warm-up, reported only);
  round 2  --rows changes: --update-ratio updates of round-1 keys, the rest inserts, then
           `run_merge` again: the measured window(s).
Ceiling, same Spark session: the rows round 2 left in the replica (decoded, replica columns,
cached and counted first) appended to a new Delta table with `mode("append")`: the cost of writing
those rows without reading the changelog, decoding, collapsing or MERGE.

    .venv/bin/python bench/bench_merge.py [--rows 50000] [--txn-rows 1000] [--update-ratio 0.3] [--seed 0]
        [--spark-conf spark.databricks.delta.snapshotPartitions=2 ...]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, markdown_table, print_environment, write_json  # noqa: E402
from tidelake.codec.keys import record_key  # noqa: E402
from tidelake.codec.row import encode_row  # noqa: E402
from tidelake.config import parse_config  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.replica_catalog import ReplicaCatalog  # noqa: E402
from tidelake.lake.watermarks import read_watermarks  # noqa: E402
from tidelake.puller.runner import PullerRunner, RunOptions  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.spark.replica_schema import COMMIT_TS_COLUMN  # noqa: E402

DATABASE, TABLE = "bench", "orders"
COLUMNS = [("id", "bigint", "pk"), ("customer", "int"), ("amount", "decimal(12,2)"), ("status", "varchar(16)"),
           ("note", "varchar(64)")]


class _Upstream:
    """The table and the seeded writes into it."""

    def __init__(self, cluster: SimCluster, seed: int) -> None:
        self.cluster = cluster
        self.rng = random.Random(seed)
        tidb = SimTiDB(cluster)
        tidb.create_database(DATABASE)
        tidb.create_table(DATABASE, TABLE, COLUMNS)
        _, self.info = tidb.resolve_table(DATABASE, TABLE)
        self.ids: list[int] = []

    def write(self, rows: int, txn_rows: int, update_ratio: float) -> int:
        tso, mvcc = self.cluster.tso, self.cluster.mvcc
        for first in range(0, rows, txn_rows):
            batch: dict[bytes, bytes] = {}
            for _ in range(min(txn_rows, rows - first)):
                handle = self.rng.choice(self.ids) if self.ids and self.rng.random() < update_ratio else 0
                if not handle or record_key(self.info.id, handle) in batch:  # one change per key and txn
                    handle = len(self.ids) + 1
                    self.ids.append(handle)
                row = {"id": handle, "customer": self.rng.randrange(100_000),
                       "amount": Decimal(self.rng.randrange(10**7)).scaleb(-2),
                       "status": self.rng.choice(("new", "paid", "shipped")), "note": f"order {handle}"}
                batch[record_key(self.info.id, handle)] = encode_row(self.info, row)
            keys = list(batch)
            start_ts = tso.next()
            mvcc.prewrite([("put", k, v) for k, v in batch.items()], keys[0], start_ts, 10_000)
            mvcc.commit(keys, start_ts, tso.next())
        return tso.next()


def _wait_durable(layout: LakeLayout, table_id: int | None, ts: int, runner_error: list) -> None:
    deadline = time.monotonic() + 600
    while True:
        if runner_error:
            raise runner_error[0]
        marks = read_watermarks(layout)
        if (table_id is None or marks.table_resolved.get(table_id, 0) >= ts) and marks.ddl_resolved >= ts:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"watermarks stuck below {ts}: {marks}")
        time.sleep(0.2)


def _merge(spark, layout: LakeLayout) -> dict:
    from tidelake.spark.merge_job import run_merge

    with Timer() as timer:
        report = run_merge(spark, layout, write_log=False)
    result = next(t for t in report.tables if t.table == f"{DATABASE}.{TABLE}")
    if report.failed or not result.rows_in:
        raise RuntimeError(f"merge did not merge bench.orders: {report.tables}")
    return {"seconds": timer.wall_s, "driver_cpu_s": timer.cpu_s, "windows": result.windows,
            "rows_in": result.rows_in, "rows_out": result.rows_out, "checkpoint": result.checkpoint_after}


def run(rows: int, txn_rows: int, update_ratio: float, seed: int, spark_confs: dict[str, str] | None = None) -> dict:
    from tidelake.spark.session import get_session

    # Spark first: launching its JVM forks, and forking while gRPC threads run is unsafe.
    started = time.perf_counter()
    spark = get_session("bench-merge", master="local[2]", extra_confs=spark_confs)
    print(f"\nSpark session start: {time.perf_counter() - started:.1f} s; extra confs: {spark_confs or 'none'}")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
            layout = LakeLayout(f"{tmp}/lake")
            cluster = SimCluster(n_stores=1, seed=seed, split_check_interval_s=0, gc_interval_s=0,
                                 cdc_options={"min_ts_interval_s": 0.2})
            with cluster:
                SimTiDB(cluster)  # TiDB's bootstrap (system tables, DDL job table) before the changefeed
                config = parse_config({
                    "changefeed": {"id": "bench"}, "upstream": {"pd": [cluster.pd_address], "gc_ttl": "10m"},
                    "filter": {"rules": [f"{DATABASE}.*"]}, "lake": {"root": layout.root},
                    "puller": {"flush_interval": "500ms"}}, "bench_merge")
                runner = PullerRunner(config, options=RunOptions(progress_interval_s=3600))
                errors: list[BaseException] = []
                thread = threading.Thread(target=lambda: _run_catching(runner, errors), daemon=True)
                thread.start()
                try:
                    _wait_durable(layout, None, 1, errors)  # first flush: the changefeed started
                    # created after the start, the table joins by its CREATE job (no bootstrap snapshot)
                    upstream = _Upstream(cluster, seed)
                    rounds = []
                    for n, ratio in ((1, 0.0), (2, update_ratio)):
                        last = upstream.write(rows, txn_rows, ratio)
                        _wait_durable(layout, upstream.info.id, last, errors)
                        rounds.append({"round": n, **_merge(spark, layout)})
                    replica = ReplicaCatalog(layout).find(DATABASE, TABLE).path
                    ceiling = _append_ceiling(spark, replica, rounds[0]["checkpoint"], f"{tmp}/append")
                finally:
                    runner.stop()
                    thread.join(60)
    finally:
        spark.stop()
    return _report(rows, rounds, ceiling)


def _run_catching(runner: PullerRunner, errors: list) -> None:
    try:
        runner.run()
    except BaseException as exc:  # handed to the bench thread
        errors.append(exc)


def _append_ceiling(spark, replica: str, after_ts: int, path: str) -> dict:
    rows = spark.read.format("delta").load(replica).where(f"{COMMIT_TS_COLUMN} > {after_ts}").cache()
    count = rows.count()
    rows.limit(1).write.format("delta").mode("append").save(path + "-warm")  # Delta writer warm-up
    with Timer() as timer:
        rows.write.format("delta").mode("append").save(path)
    rows.unpersist()
    return {"rows": count, "seconds": timer.wall_s, "rows_per_s": count / timer.wall_s}


def _report(rows: int, rounds: list[dict], ceiling: dict) -> dict:
    """Changes = changelog rows of the round (one per written key and txn); keys = the MERGE's
    source rows after collapsing to the last change per key; written = replica rows touched."""
    measured = rounds[1]
    change_rate = rows / measured["seconds"]
    out_rate = measured["rows_out"] / measured["seconds"]
    print(f"\n## Merge: {rows:,} changes per round into bench.orders (local[2] Spark)\n")
    print(markdown_table(
        ["run", "windows", "changes", "keys after collapse", "replica rows written", "s", "changes/s",
         "rows written/s"],
        [[f"round {r['round']}" + (" (creates replica, warm-up)" if r["round"] == 1 else ""), r["windows"], rows,
          r["rows_in"], r["rows_out"], r["seconds"], rows / r["seconds"], r["rows_out"] / r["seconds"]]
         for r in rounds]
        + [["ceiling: plain Delta append of round 2's replica rows", "-", "-", "-", ceiling["rows"],
            ceiling["seconds"], "-", ceiling["rows_per_s"]]]))
    ratio = out_rate / ceiling["rows_per_s"]
    print(f"\nmerge (round 2) rows written/s / plain append rows/s = {ratio:.3f}")
    return {"changes_per_round": rows, "rounds": rounds, "append_ceiling": ceiling,
            "merge_changes_per_s": change_rate, "merge_rows_out_per_s": out_rate, "ratio_vs_append": ratio}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000, help="changes per round")
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--update-ratio", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf for the session (repeatable), to measure a setting's effect")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    confs = dict(c.split("=", 1) for c in args.spark_conf)
    env = print_environment()
    results = run(args.rows, args.txn_rows, args.update_ratio, args.seed, confs)
    write_json(args.json, "merge", env, results)
    return results


if __name__ == "__main__":
    main()
