"""Snapshot read throughput of bootstrap on the simulator, all in the same run on the same data:
  ceiling     raw KvScan through SnapshotReader (no decoding), same ranges: rows/s
  decode      the row decoding alone on the scanned pairs, in rows per CPU-second: the reference
              (decode_row + spark_value per value, what bootstrap did before the compiled
              decoder), bootstrap's RowDecoder (tidelake.codec.compiled_row inside)
              and merge's mount decoder (tidelake.merge.mount) on the same rows as changelog puts
  local       SnapshotReader + RowDecoder into replica Arrow batches in this process
  processes   --processes N: N processes, each reading every N-th range as `local` does (what each
              Spark task runs, without Spark), to see the read scale with workers
  spark       one Spark task per region range (tidelake.bootstrap.spark_snapshot) on --master
Ratios are against the ceiling; "per core" divides the Spark rate by the cores its tasks had, and
"rows per CPU s" compares the CPU seconds of this process (which also runs the simulated TiKV).

    .venv/bin/python bench/bench_bootstrap.py --rows 1000000 --regions 8 --master local[2] --json out.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, markdown_table, print_environment, write_json  # noqa: E402
from tidelake.merge.replica_schema import stored_columns  # noqa: E402
from tidelake.bootstrap.snapshot_plan import KeyRange, region_ranges  # noqa: E402
from tidelake.bootstrap.progress import TableProgress  # noqa: E402
from tidelake.bootstrap.replica_rows import RowDecoder, replica_arrow_schema  # noqa: E402
from tidelake.bootstrap.snapshot_read import read_table  # noqa: E402
from tidelake.bootstrap.spark_snapshot import table_frame  # noqa: E402
from tidelake.codec.keys import decode_record_key, record_key  # noqa: E402
from tidelake.codec.memcomparable_bytes import encode_bytes  # noqa: E402
from tidelake.codec.row import decode_row  # noqa: E402
from tidelake.codec.schema import TableInfo  # noqa: E402
from tidelake.codec.spark_types import spark_value  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.upstream.kv_snapshot import SnapshotReader  # noqa: E402
from tidelake.upstream.pd_client import PDClient  # noqa: E402

COLUMNS = {
    "narrow": [("id", "bigint", "pk"), ("v", "varchar(32)"), ("n", "int")],
    "wide": [("id", "bigint", "pk"), ("v", "varchar(32)"), ("n", "int"), ("price", "decimal(12,2)"),
             ("at", "datetime(6)"), ("note", "text"), ("flag", "tinyint"), ("big", "bigint unsigned")],
}  # fmt: skip
BATCH_ROWS = 8192


def row_values(shape: str, i: int) -> dict:
    from datetime import datetime, timedelta
    from decimal import Decimal

    row = {"id": i, "v": f"value-{i:012d}", "n": i % 1000}
    if shape == "wide":
        row |= {"price": Decimal(i % 100000) / 100, "at": datetime(2024, 1, 1) + timedelta(seconds=i, microseconds=i % 7),
                "note": None if i % 3 else "a longer note " * 3, "flag": i % 2, "big": 2**63 + i}
    return row


def load(tidb: SimTiDB, shape: str, rows: int) -> None:
    for start in range(0, rows, 2000):
        with tidb.txn() as t:
            for i in range(start, min(rows, start + 2000)):
                t.insert("bench", "t", row_values(shape, i))


def reference_batch(info: TableInfo, schema: pa.Schema, ts: int, pairs: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
    """Replica rows as bootstrap made them before the compiled decoder: decode_row per row,
    spark_value per value (it looks up the type mapping each time), one list per column."""
    stored = stored_columns(info)
    values: list[list] = [[] for _ in schema]
    for key, value in pairs:
        physical_id, handle = decode_record_key(key)
        row = decode_row(value, info, handle)
        for i, column in enumerate(stored):
            values[i].append(spark_value(row.get(column.name), column.field_type))
        values[len(stored)].append(ts)
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(values, schema)], schema=schema)


def mount_decoder(info: TableInfo, schema: pa.Schema, ts: int):
    """Merge's decoder over the pairs as changelog puts (no Spark: the function mapInArrow runs)."""
    from tidelake.merge.mount import RowMounter
    from tidelake.merge.window_spec import OP_COLUMN
    from tidelake.lake.row_change import OP_PUT

    output = schema.append(pa.field(OP_COLUMN, pa.string()))
    mounter = RowMounter(json.dumps(info.to_json()), output)
    types = [pa.int64(), pa.int64(), pa.string(), pa.binary(), pa.binary(), pa.binary()]
    names = ["table_id", "commit_ts", "op", "key", "value", "old_value"]

    def decode(pairs: list[tuple[bytes, bytes]]) -> pa.RecordBatch:
        n = len(pairs)
        keys, values = zip(*pairs)
        columns = [[info.id] * n, [ts] * n, [OP_PUT] * n, keys, values, [b""] * n]
        batch = pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(columns, types)], names=names)
        return next(mounter(iter([batch])))

    return decode


def read_part(pd_address: str, info_json: str, ranges: list, ts: int) -> int:
    """One worker of the --processes read: its own PD client and SnapshotReader, like a Spark task."""
    pd = PDClient([pd_address])
    try:
        with SnapshotReader(pd) as reader:
            quiet = TableProgress("bench.t", len(ranges), 1e9, io.StringIO())
            return read_table(reader, TableInfo.from_json(info_json), ranges, ts, quiet).num_rows
    finally:
        pd.close()


def processes_read(n: int, pd_address: str, info: TableInfo, ranges: list, ts: int) -> tuple[int, Timer]:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(n) as pool:
        pool.map(abs, range(n))  # workers started and this module imported before timing
        parts = [(pd_address, json.dumps(info.to_json()), ranges[i::n], ts) for i in range(n)]
        with Timer() as timer:
            rows = sum(pool.starmap(read_part, parts))
    return rows, timer


def decode_rate(decode, pairs: list[tuple[bytes, bytes]]) -> tuple[int, Timer]:
    rows = 0
    with Timer() as timer:
        for start in range(0, len(pairs), BATCH_ROWS):
            rows += decode(pairs[start:start + BATCH_ROWS]).num_rows
    return rows, timer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--regions", type=int, default=8)
    parser.add_argument("--shape", choices=sorted(COLUMNS), default="narrow",
                        help="narrow: bigint PK, varchar, int; wide: also decimal, datetime, text with NULLs, "
                             "tinyint, bigint unsigned")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--processes", type=int, default=0, help="also read with N worker processes")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark read")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args()
    env = print_environment()
    results: dict = {"rows": args.rows, "regions": args.regions, "shape": args.shape, "runs": []}

    def record(path: str, rows: int, timer: Timer, cores: float = 1.0) -> dict:
        run = {"path": path, "rows": rows, "wall_s": round(timer.wall_s, 3), "cpu_s": round(timer.cpu_s, 3),
               "rows_per_s": round(rows / timer.wall_s), "cores": cores, "load_avg_1m": round(os.getloadavg()[0], 1)}
        results["runs"].append(run)
        print(f"{path:32s} {rows:>9d} rows in {timer.wall_s:7.2f}s = {run['rows_per_s']:>9,d} rows/s", flush=True)
        return run

    with SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8) as sim:
        tidb = SimTiDB(sim)
        tidb.create_database("bench")
        table_id = tidb.create_table("bench", "t", COLUMNS[args.shape]).table_id
        print(f"loading {args.rows} rows ...", flush=True)
        load(tidb, args.shape, args.rows)
        step = max(args.rows // args.regions, 1)
        for h in range(step, args.rows, step):
            key = encode_bytes(record_key(table_id, h))
            sim.split_region(sim.regions.locate(key).id, key)
        info = tidb.table_info("bench", "t")
        pd = PDClient([sim.pd_address])
        ts = pd.get_ts()
        ranges = region_ranges(pd, table_id)
        results["regions"] = len(ranges)
        print(f"{len(ranges)} region ranges at ts {ts}", flush=True)
        with SnapshotReader(pd) as reader:
            with Timer() as timer:
                rows = sum(1 for r in ranges for _ in reader.scan(r.start, r.end, ts))
            ceiling = record("ceiling (KvScan, no decoding)", rows, timer)
            quiet = TableProgress("bench.t", len(ranges), 1e9, io.StringIO())
            with Timer() as timer:
                rows = read_table(reader, info, ranges, ts, quiet).num_rows
            local = record("local: read + decode", rows, timer)
            # the decode-only runs hold every pair in memory (a million live tuples slow the
            # collector of this process, the simulator's too), so they come after the local read
            pairs = [pair for r in ranges for pair in reader.scan(r.start, r.end, ts)]
            schema = replica_arrow_schema(info)
            sample = pairs[:BATCH_ROWS]
            if not reference_batch(info, schema, ts, sample).equals(RowDecoder(info, ts).batch(sample)):
                raise SystemExit("the compiled decoder's rows differ from the reference's")
            decode_runs = {}
            for name, decode in (("reference", lambda chunk: reference_batch(info, schema, ts, chunk)),
                                 ("RowDecoder", RowDecoder(info, ts).batch),
                                 ("mount", mount_decoder(info, schema, ts))):
                rows, timer = decode_rate(decode, pairs)
                decode_runs[name] = rows / timer.cpu_s
                record(f"decode only: {name}", rows, timer)
            del pairs, sample
        if args.processes:
            rows, timer = processes_read(args.processes, sim.pd_address, info, ranges, ts)
            record(f"{args.processes} processes: read + decode", rows, timer, min(args.processes, os.cpu_count() or 1))
        spark_run = None
        if not args.no_spark:
            from tidelake.spark.spark_session import get_session

            spark = get_session("bench-bootstrap", master=args.master)
            spark.range(1).count()  # the JVM warm before timing
            # Python workers started and their imports done, as for every task after a table's first
            # ones: empty ranges (start = end) read nothing
            empty = [KeyRange(r.physical_id, r.start, r.start) for r in ranges[:2]]
            table_frame(spark, [sim.pd_address], None, info, empty, ts).frame.count()
            read = table_frame(spark, [sim.pd_address], None, info, ranges, ts)
            with Timer() as timer:
                rows = read.frame.count()
            match = re.fullmatch(r"local\[(\d+|\*)\]", args.master)
            cores = min(int(match.group(1)), os.cpu_count() or 1) if match and match.group(1) != "*" else os.cpu_count() or 1
            spark_run = record(f"spark {args.master}", rows, timer, cores)
            spark.stop()
        pd.close()

    ratios = {
        "RowDecoder / reference (rows per CPU s)": decode_runs["RowDecoder"] / decode_runs["reference"],
        "mount / reference (rows per CPU s)": decode_runs["mount"] / decode_runs["reference"],
        "RowDecoder (rows per CPU s) / ceiling": decode_runs["RowDecoder"] / ceiling["rows_per_s"],
        "local / ceiling": local["rows_per_s"] / ceiling["rows_per_s"],
        # this process does all of both (client and simulated TiKV), so CPU seconds compare them
        # per core even when a busy machine gives this process less than a core
        "local / ceiling (rows per CPU s)": ceiling["cpu_s"] / local["cpu_s"],
    }
    for run in results["runs"]:
        if run["path"].endswith("processes: read + decode"):
            ratios["processes / ceiling"] = run["rows_per_s"] / ceiling["rows_per_s"]
            ratios["processes per core / ceiling"] = run["rows_per_s"] / run["cores"] / ceiling["rows_per_s"]
    if spark_run is not None:
        ratios["spark / ceiling"] = spark_run["rows_per_s"] / ceiling["rows_per_s"]
        ratios["spark per core / ceiling"] = spark_run["rows_per_s"] / spark_run["cores"] / ceiling["rows_per_s"]
    results["decode_rows_per_cpu_s"] = {k: round(v) for k, v in decode_runs.items()}
    results["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
    print()
    print(markdown_table(["path", "rows", "s", "CPU s", "rows/s", "vs ceiling"],
                         [(r["path"], r["rows"], r["wall_s"], r["cpu_s"], r["rows_per_s"],
                           r["rows_per_s"] / ceiling["rows_per_s"]) for r in results["runs"]]))
    print()
    print(markdown_table(["ratio", "value"], list(results["ratios"].items())))
    write_json(args.json, "bootstrap", env, results)


if __name__ == "__main__":
    main()
