"""Write-path benchmark of the lander: delta-rs vs delta-spark, against a raw Parquet ceiling.

For each batch size it lands the same batch of raw change events (values of --value-bytes)
the ways the puller could, in one process and one run:
  parquet      pyarrow.parquet.write_table of the converted batch (no Delta log): the ceiling
  delta-rs     ChangelogWriter.append: RowChange -> Arrow, partitioned write, one commit + txn
  delta-rs arrow  write_deltalake of the already converted batch (isolates the Delta write)
  delta-spark  the same Arrow batch through a long-lived local SparkSession, partitioned append
               with txnAppId/txnVersion (JVM start-up excluded, first write excluded as warm-up)
and prints rows/s, median latency per flush, its ratio to the ceiling, and the RSS it needed.

    .venv/bin/python bench/bench_lander.py [--sizes 1000,10000,100000] [--repeats 5] [--no-spark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

import pyarrow.parquet as pq
from deltalake import write_deltalake

from tidelake.capture.landing.changelog_writer import ChangelogWriter, rows_to_arrow
from tidelake.capture.landing.app_txn import commit_properties
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import RowChange
from tidelake.tso import compose


def make_batch(n: int, value_bytes: int, tables: int, seq: int) -> list[RowChange]:
    now = int(time.time() * 1000)
    value = os.urandom(value_bytes // 2).hex().encode()[:value_bytes]
    return [
        RowChange(
            table_id=100 + i % tables,
            commit_ts=compose(now, (seq * n + i) % (1 << 18)),
            start_ts=compose(now - 5),
            op="put",
            key=b"t\x80\x00\x00\x00\x00\x00\x00\x64_r%012d" % (seq * n + i),
            value=value,
            old_value=b"",
            region_id=1 + i % 16,
        )
        for i in range(n)
    ]


def rss_mb(pid: int) -> float:
    """Resident set of one process (Linux /proc; the bench runs where the puller runs)."""
    with open(f"/proc/{pid}/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return kib / 1024


def measure(flush: Callable[[int], None], repeats: int) -> tuple[float, float]:
    """Median seconds per flush and how far this process's RSS rose (MiB) while flushing."""
    times, before = [], rss_mb(os.getpid())
    peak = before
    for seq in range(1, repeats + 1):
        started = time.perf_counter()
        flush(seq)
        times.append(time.perf_counter() - started)
        peak = max(peak, rss_mb(os.getpid()))
    return statistics.median(times), peak - before


def run(sizes: list[int], repeats: int, value_bytes: int, tables: int, spark: bool) -> None:
    root = tempfile.mkdtemp(prefix="bench-lander-")
    results: list[tuple[int, str, float, float, float]] = []
    session = None
    jvm_pid = 0
    try:
        if spark:
            from tidelake.spark.spark_session import get_session

            started = time.perf_counter()
            session = get_session("bench-lander", master="local[2]")
            print(f"Spark session start: {time.perf_counter() - started:.1f} s")
            jvm_pid = session.sparkContext._gateway.proc.pid  # noqa: SLF001 - the JVM we started
        for n in sizes:
            batches = {seq: make_batch(n, value_bytes, tables, seq) for seq in range(repeats + 2)}
            arrow = {seq: rows_to_arrow(b, seq, 3600) for seq, b in batches.items()}
            layout = LakeLayout(f"{root}/delta-rs-{n}")
            writer = ChangelogWriter(layout, "bench")

            def parquet(seq: int, n: int = n) -> None:
                pq.write_table(arrow[seq], f"{root}/ceiling-{n}-{seq}.parquet")

            def delta_rs(seq: int) -> None:
                writer.append(batches[seq], seq)

            def delta_rs_arrow(seq: int, n: int = n) -> None:
                write_deltalake(f"{root}/delta-rs-arrow-{n}", arrow[seq], mode="append",
                                partition_by=["table_id", "commit_bucket"],
                                commit_properties=commit_properties("bench", seq))

            paths = (("parquet (ceiling)", parquet), ("delta-rs", delta_rs),
                     ("delta-rs arrow", delta_rs_arrow))
            for name, flush in paths:
                seconds, grew = measure(flush, repeats)
                results.append((n, name, seconds, grew, 0.0))
            if session is not None:
                path = f"{root}/delta-spark-{n}"

                def delta_spark(seq: int, path: str = path) -> None:
                    df = session.createDataFrame(arrow[seq])
                    (df.write.format("delta").mode("append")
                     .partitionBy("table_id", "commit_bucket")
                     .option("txnAppId", "bench").option("txnVersion", seq).save(path))

                delta_spark(repeats + 1)  # warm-up: table creation, code generation
                seconds, grew = measure(delta_spark, repeats)
                results.append((n, "delta-spark", seconds, grew, rss_mb(jvm_pid)))
    finally:
        if session is not None:
            session.stop()
        shutil.rmtree(root, ignore_errors=True)
    print_table(results, value_bytes, tables)


def print_table(
    results: list[tuple[int, str, float, float, float]], value_bytes: int, tables: int
) -> None:
    print(f"values {value_bytes} B, {tables} tables, one hour bucket; median per flush;")
    print("py +RSS = growth of this process while flushing; JVM RSS = the Spark driver JVM")
    print(f"{'rows':>8}  {'path':<18} {'flush ms':>9} {'rows/s':>10} {'vs ceiling':>10} "
          f"{'py +RSS':>8} {'JVM RSS':>8}")
    ceiling = {n: s for n, name, s, _, _ in results if name.startswith("parquet")}
    for n, name, seconds, grew, jvm in results:
        print(f"{n:>8}  {name:<18} {seconds * 1000:>9.1f} {n / seconds:>10.0f} "
              f"{ceiling[n] / seconds:>10.2f} {grew:>8.0f} {jvm:>8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--value-bytes", type=int, default=200)
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    run(sizes, args.repeats, args.value_bytes, args.tables, not args.no_spark)


if __name__ == "__main__":
    main()
