"""Local read path: a table's rows at T through one SnapshotReader, as replica Arrow batches.

Used for small tables (below `--spark-threshold-regions`), where starting Spark tasks costs
more than the read. Each planned range is scanned with SnapshotReader.scan, which follows
regions that split or move during the read and resolves every lock it meets (docs/metadata.md#the-scan-loop-of-a-snapshot-reader), so the rows are exactly the commits <= T.
Owner: bootstrap.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain, islice

import pyarrow as pa

from tidelake.bootstrap.progress import TableProgress
from tidelake.bootstrap.replica_rows import RowDecoder
from tidelake.bootstrap.snapshot_plan import KeyRange
from tidelake.codec.schema import TableInfo
from tidelake.upstream.kv_snapshot import SnapshotReader

BATCH_ROWS = 8192


def scan_range(reader: SnapshotReader, key_range: KeyRange, ts: int, counted: Callable[[int, int], None],
               batch_rows: int = BATCH_ROWS) -> Iterator[list[tuple[bytes, bytes]]]:
    """(key, value) pairs of one range in lists of up to `batch_rows`, each the rows of one Arrow
    batch; `counted(rows, bytes)` is called per list (cut and counted in C, not per row)."""
    pairs = reader.scan(key_range.start, key_range.end, ts)
    while chunk := list(islice(pairs, batch_rows)):
        counted(len(chunk), sum(map(len, chain.from_iterable(chunk))))
        yield chunk


def read_table(reader: SnapshotReader, info: TableInfo, ranges: list[KeyRange], ts: int,
               progress: TableProgress) -> pa.Table:
    """All rows of the table at `ts`, held in memory (small tables only)."""
    decoder = RowDecoder(info, ts)
    batches: list[pa.RecordBatch] = []
    for key_range in ranges:
        batches.extend(decoder.batch(chunk) for chunk in scan_range(reader, key_range, ts, progress.add))
        progress.add(0, 0, ranges_done=1)
    return pa.Table.from_batches(batches, schema=decoder.schema)
