"""The rows a job rewrote that no row event carries as the schema after it reads them
(tidelake.codec.ddl_job.copied_physical_ids: a re-partitioning's new ids, a reorganising MODIFY
COLUMN's table), landed as puts at the job's finished ts F before its `ddl` row and before the
shard reports a DDL resolved ts >= F (docs/sql-front.md#what-the-replica-side-does). The puller
reads each id at F with the snapshot reader bootstrap uses (KvScan over kvrpcpb, locks resolved):
F is above the GC safepoint the puller holds, which stays below its durable DDL watermark < F.
Landed again after a restart, a put is the same (key, commit ts) change twice, which the merge
collapses (docs/design.md invariant 5). Owner: the puller shard that feeds the ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from tidelake.capture.landing.lander import Lander
from tidelake.lake.row_change import OP_PUT, RowChange
from tidelake.upstream.kv_snapshot import SnapshotReader

BATCH_ROWS = 1024  # rows per add_rows call: the lander's memory quota applies between batches


def land_copied_rows(reader: SnapshotReader, lander: Lander, physical_ids: Iterable[int], finished_ts: int) -> int:
    """Buffer every row of `physical_ids` at `finished_ts` as a put committed at that ts; the
    number of rows. Call before the job's `ddl` row and the ids' resolved ts reach the lander."""
    total = 0
    for pid in sorted(physical_ids):
        pairs = reader.scan_table(pid, finished_ts)
        while batch := list(islice(pairs, BATCH_ROWS)):
            # No region: the rows come from a snapshot read, not a region's event stream.
            lander.add_rows([RowChange(pid, finished_ts, finished_ts, OP_PUT, key, value, b"", 0)
                             for key, value in batch])
            total += len(batch)
    return total
