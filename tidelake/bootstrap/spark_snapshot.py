"""Distributed read path, as TiSpark does it: one Spark task per region range.

The driver lists the table's region ranges from PD (plan.region_ranges); each task opens its
own PDClient and SnapshotReader, scans its raw key range at T (following splits and moves, and
resolving locks, docs/metadata.md#the-scan-loop-of-a-snapshot-reader) and yields decoded replica rows as Arrow
batches (mapInArrow), so rows never pass through the driver. Progress comes back through
accumulators, which Spark updates as tasks finish. Owner: bootstrap.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tidelake.bootstrap.progress import TableProgress
from tidelake.bootstrap.replica_rows import RowDecoder, replica_ddl
from tidelake.bootstrap.snapshot_plan import KeyRange
from tidelake.bootstrap.snapshot_read import scan_range
from tidelake.codec.schema import TableInfo
from tidelake.config import TlsConfig
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_POLL_S = 1.0


def _range_reader(pd_endpoints: list[str], tls: TlsConfig | None, info_json: str, ts: int, batch_rows: int,
                  rows_acc, bytes_acc, ranges_acc):
    """The per-task function; everything it needs is in its closure (pickled to executors)."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = RowDecoder(TableInfo.from_json(info_json), ts)
        pd = PDClient(pd_endpoints, tls, caller_id="tidelake-bootstrap-task")
        try:
            with SnapshotReader(pd, tls) as reader:
                for batch in batches:
                    for row in batch.to_pylist():
                        key_range = KeyRange(row["physical_id"], row["start"], row["end"])

                        def counted(rows: int, nbytes: int) -> None:
                            rows_acc.add(rows)
                            bytes_acc.add(nbytes)

                        yield from map(decoder.batch, scan_range(reader, key_range, ts, counted, batch_rows))
                        ranges_acc.add(1)
        finally:
            pd.close()

    return read


@dataclass(frozen=True)
class SparkRead:
    """The lazy DataFrame of a table's rows and the accumulators its tasks count into."""

    frame: DataFrame
    rows: Any
    bytes: Any
    ranges: Any


def table_frame(spark: SparkSession, pd_endpoints: list[str], tls: TlsConfig | None, info: TableInfo,
                ranges: list[KeyRange], ts: int, batch_rows: int = 8192) -> SparkRead:
    """The table's rows at `ts`, one partition per range (lazy: the replica write runs it)."""
    sc = spark.sparkContext
    rows_acc, bytes_acc, ranges_acc = sc.accumulator(0), sc.accumulator(0), sc.accumulator(0)
    ranges_rdd = sc.parallelize([(r.physical_id, r.start, r.end) for r in ranges], max(len(ranges), 1))
    ranges_df = spark.createDataFrame(ranges_rdd, "physical_id BIGINT, start BINARY, end BINARY")
    reader = _range_reader(pd_endpoints, tls, json.dumps(info.to_json()), ts, batch_rows,
                           rows_acc, bytes_acc, ranges_acc)
    return SparkRead(ranges_df.mapInArrow(reader, replica_ddl(info)), rows_acc, bytes_acc, ranges_acc)


class AccumulatorWatcher:
    """Prints the table's progress from the driver while a Spark job reads it."""

    def __init__(self, read: SparkRead, progress: TableProgress) -> None:
        self._read = read
        self._progress = progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{progress.name}", daemon=True)

    def __enter__(self) -> AccumulatorWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self._update()

    def _run(self) -> None:
        while not self._stop.wait(_POLL_S):
            self._update()

    def _update(self) -> None:
        read = self._read
        self._progress.set_totals(read.rows.value, read.bytes.value, read.ranges.value)
