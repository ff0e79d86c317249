"""Snapshot read throughput of bootstrap on the simulator: rows/s of
  ceiling   raw KvScan through SnapshotReader (no decoding), same ranges,
  local     SnapshotReader + decoding into replica Arrow batches in this process,
  spark     one Spark task per region range (tidelake.bootstrap.spark_snapshot) on local[N],
all in the same run on the same data.

    .venv/bin/python bench/bench_bootstrap.py --rows 1000000 --regions 8 --master local[2]
"""

from __future__ import annotations

import argparse
import io
import time

from tidelake.bootstrap.plan import region_ranges
from tidelake.bootstrap.progress import TableProgress
from tidelake.bootstrap.snapshot_read import read_table
from tidelake.bootstrap.spark_snapshot import table_frame
from tidelake.codec.keys import record_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient

COLUMNS = [("id", "bigint", "pk"), ("v", "varchar(32)"), ("n", "int")]


def load(tidb: SimTiDB, rows: int) -> None:
    for start in range(0, rows, 2000):
        with tidb.txn() as t:
            for i in range(start, min(rows, start + 2000)):
                t.insert("bench", "t", {"id": i, "v": f"value-{i:012d}", "n": i % 1000})


def timed(what: str, rows_fn) -> float:
    started = time.monotonic()
    rows = rows_fn()
    seconds = time.monotonic() - started
    print(f"{what:8s} {rows:>9d} rows in {seconds:7.2f}s = {rows / seconds:>10.0f} rows/s", flush=True)
    return rows / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    with SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8) as sim:
        tidb = SimTiDB(sim)
        tidb.create_database("bench")
        table_id = tidb.create_table("bench", "t", COLUMNS).table_id
        print(f"loading {args.rows} rows ...", flush=True)
        load(tidb, args.rows)
        step = args.rows // args.regions
        for h in range(step, args.rows, step):
            key = encode_bytes(record_key(table_id, h))
            sim.split_region(sim.regions.locate(key).id, key)
        info = tidb.table_info("bench", "t")
        pd = PDClient([sim.pd_address])
        ts = pd.get_ts()
        ranges = region_ranges(pd, table_id)
        print(f"{len(ranges)} region ranges at ts {ts}", flush=True)
        with SnapshotReader(pd) as reader:
            timed("ceiling", lambda: sum(1 for r in ranges for _ in reader.scan(r.start, r.end, ts)))
            quiet = TableProgress("bench.t", len(ranges), 1e9, io.StringIO())
            timed("local", lambda: read_table(reader, info, ranges, ts, quiet).num_rows)

        from tidelake.apply.session import get_session

        spark = get_session("bench-bootstrap", master=args.master)
        spark.range(1).count()  # JVM and Python workers warm before timing
        read = table_frame(spark, [sim.pd_address], None, info, ranges, ts)
        timed(f"spark {args.master}", lambda: read.frame.count())
        spark.stop()
        pd.close()


if __name__ == "__main__":
    main()
