"""What compacting closed commit buckets buys a merge: reading a window of many flush files vs the
same window after the puller's compaction (tidelake.capture.landing.bucket_compaction), in one run.

The real Lander lands --flushes flushes of --rows-per-flush changes of one table into one closed
hour bucket (each flush leaves one file there, as a 2 s flush interval does under steady traffic),
plus the same into a second table so the window read prunes partitions as a merge's does. Then,
in one Spark session (the merge's own reader, tidelake.merge.changelog_reader.read_windows):
  before   the window read and counted --repeats times over the flush files (first read is warm-up);
  compact  BucketCompactor.compact_once() with the table's watermark past the bucket (timed);
  after    the same reads over the compacted files: the ceiling this run measures.
Reported: files in the window before and after, read medians, before/after ratio, compaction
time and rows/s, and delta-rs log load time of the changelog before and after.

    .venv/bin/python bench/bench_compaction.py [--flushes 1000] [--rows-per-flush 50] [--repeats 5] [--json F]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, markdown_table, median, print_environment, write_json  # noqa: E402
from tidelake.capture.landing.bucket_compaction import BucketCompactor  # noqa: E402
from tidelake.lake.commit_buckets import bucket_label  # noqa: E402
from tidelake.capture.landing.lander import Lander  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.row_change import RowChange  # noqa: E402
from tidelake.tso import compose  # noqa: E402

TABLES = (101, 102)
HOUR_MS = 3_600_000


def _land(layout: LakeLayout, flushes: int, rows_per_flush: int, bucket_start_ms: int) -> tuple[Lander, int]:
    """Every flush: rows_per_flush changes of each table, commit ts inside the one bucket."""
    lander = Lander(layout, "bench", flush_interval_s=3600, compact_interval_s=3600)
    value = b"v" * 64
    n = 0
    for flush in range(flushes):
        rows = []
        for table_id in TABLES:
            for i in range(rows_per_flush):
                n += 1
                ms = bucket_start_ms + 1 + (n * HOUR_MS // (flushes * rows_per_flush * len(TABLES) + 2))
                rows.append(RowChange(table_id, compose(ms, n % 1000), compose(ms, 0), "put",
                                      b"t%d_r%010d" % (table_id, flush * rows_per_flush + i), value, b"", 1))
        lander.add_rows(rows)
        lander.flush()
        if flush and flush % 200 == 0:
            print(f"  landed {flush} flushes", flush=True)
    return lander, n


def _files(layout: LakeLayout, table_id: int) -> int:
    import pyarrow as pa
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(layout.changelog).get_add_actions(flatten=True))
    return sum(1 for t in actions["partition.table_id"].to_pylist() if int(t) == table_id)


def _log_load_s(layout: LakeLayout) -> float:
    from deltalake import DeltaTable

    started = time.perf_counter()
    DeltaTable(layout.changelog).get_add_actions(flatten=True)
    return time.perf_counter() - started


def _reads(spark, layout: LakeLayout, lo: int, hi: int, repeats: int) -> tuple[float, int]:
    from tidelake.merge.changelog_reader import Window, read_windows

    times, count = [], 0
    for i in range(repeats + 1):
        spark.catalog.clearCache()
        with Timer() as t:
            count = read_windows(spark, layout, [Window((TABLES[0],), lo, hi)], 3600).count()
        if i:  # the first read warms the session up
            times.append(t.wall_s)
    return median(times), count


def run(flushes: int, rows_per_flush: int, repeats: int) -> dict:
    from tidelake.spark.spark_session import get_session

    now_ms = int(time.time() * 1000)
    bucket_start_ms = now_ms - now_ms % HOUR_MS - 2 * HOUR_MS  # a closed bucket two hours back
    lo, hi = compose(bucket_start_ms, 0), compose(bucket_start_ms + HOUR_MS, 0) - 1
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        layout = LakeLayout(str(Path(tmp) / "lake"))
        print(f"landing {flushes} flushes of {rows_per_flush} changes x {len(TABLES)} tables "
              f"into bucket {bucket_label(lo + 1, 3600)}", flush=True)
        lander, landed = _land(layout, flushes, rows_per_flush, bucket_start_ms)
        for table_id in TABLES:
            lander.resolve(table_id, hi)
        lander.flush()
        spark = get_session("bench-compaction", master="local[2]")
        files_before, log_before = _files(layout, TABLES[0]), _log_load_s(layout)
        read_before, count_before = _reads(spark, layout, lo, hi, repeats)
        with Timer() as compaction:
            removed = BucketCompactor(layout, lambda: lander.durable_watermarks()[0], 3600).compact_once()
        files_after, log_after = _files(layout, TABLES[0]), _log_load_s(layout)
        read_after, count_after = _reads(spark, layout, lo, hi, repeats)
        lander.close()
    if count_before != count_after or count_before != flushes * rows_per_flush:
        raise SystemExit(f"the window held {count_before} changes before and {count_after} after, "
                         f"expected {flushes * rows_per_flush}")
    return {
        "flushes": flushes, "rows_per_flush": rows_per_flush, "window_rows": count_after, "rows_landed": landed,
        "files_before": files_before, "files_after": files_after, "files_removed": removed,
        "read_before_s": read_before, "read_after_s": read_after,
        "read_before_vs_after": read_before / read_after,
        "compaction_s": compaction.wall_s, "compaction_rows_per_s": landed / compaction.wall_s,
        "log_load_before_s": log_before, "log_load_after_s": log_after,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flushes", type=int, default=1000, help="flushes, each leaving one file per table")
    parser.add_argument("--rows-per-flush", type=int, default=50, help="changes per table per flush")
    parser.add_argument("--repeats", type=int, default=5, help="timed window reads before and after")
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    results = run(args.flushes, args.rows_per_flush, args.repeats)
    print(markdown_table(
        ["", "files in the window", "window read (median s)", "changelog log load (s)"],
        [["flush files", results["files_before"], f"{results['read_before_s']:.2f}", f"{results['log_load_before_s']:.3f}"],
         ["compacted", results["files_after"], f"{results['read_after_s']:.2f}", f"{results['log_load_after_s']:.3f}"]]))
    print(f"read before/after: {results['read_before_vs_after']:.2f}x; compaction {results['compaction_s']:.2f} s "
          f"({results['compaction_rows_per_s']:,.0f} rows/s, {results['files_removed']} files removed)")
    write_json(args.json, "bench_compaction", env, results)
    return results


if __name__ == "__main__":
    main()
