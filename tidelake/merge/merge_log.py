"""The merge log: one row per table per merge run, for `tidelake status` and the Airflow page.

Appended by every run with delta-rs (blind appends never conflict); the replica's own commit
stays the truth for the checkpoint. Readers look back a bounded RECENT window, and maintenance
trims and rewrites it so file stats keep pruning. Owner: the merge run.

More: docs/internals.md#merge_log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from tidelake.errors import InputError
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import LakeLayout, open_or_create
from tidelake.lake.replica_facts import REPLICA_FACTS_TYPE, ReplicaFacts


class MergeStatus(StrEnum):
    """How one table's part of a merge run ended."""

    MERGED = "merged"  # advanced (data, DDL or an empty window)
    IDLE = "idle"  # nothing new within the bounds
    BLOCKED = "blocked"  # cannot advance yet (e.g. a partition without a resolved ts)
    STOPPED = "stopped"  # an unsupported DDL stopped the table (needs an operator)
    ERROR = "error"  # this run failed for the table; the next run retries


MERGE_LOG_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("table_key", pa.int64(), nullable=False),
        pa.field("table_name", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("checkpoint_before", pa.int64(), nullable=True),
        pa.field("checkpoint_after", pa.int64(), nullable=True),
        pa.field("windows", pa.int64(), nullable=False),
        pa.field("ddls_applied", pa.int64(), nullable=False),
        pa.field("rows_in", pa.int64(), nullable=False),
        pa.field("rows_out", pa.int64(), nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("reason", pa.string(), nullable=True),
        pa.field("started_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("finished_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("replica", REPLICA_FACTS_TYPE, nullable=True),
    ]
)


# How far back from the newest entry status and the page look: 48 runs at the default 5-minute
# merge schedule, what the page charts (merge_history.DEFAULT_RUNS).
RECENT = timedelta(hours=4)
# What maintenance keeps by default: a week of runs, for reading by hand (Spark, delta-rs).
DEFAULT_RETENTION = timedelta(days=7)
# One commit per run: a checkpoint every 10 keeps a read's log replay short; removed files
# (retention, compaction) and old commits are dropped after a day, as readers only need the
# latest version (the watermarks table does the same, tidelake.lake.layout).
MERGE_LOG_PROPERTIES = {
    "delta.checkpointInterval": "10",
    "delta.logRetentionDuration": "interval 1 days",
    "delta.deletedFileRetentionDuration": "interval 1 days",
}
VACUUM_HOURS = 24
# Compacted files of at most ~1 MiB, in row groups of a few runs over 1,000 tables: a read of the
# last minutes after a compaction decodes the row groups whose stats reach them, not the file.
COMPACTED_FILE_BYTES = 1 << 20
COMPACTED_ROW_GROUP = 8192
# What status reads of the log first: two runs at the default schedule.
FIRST_LOOK = timedelta(minutes=10)
_FINISHED = "finished_at"


@dataclass(frozen=True)
class MergeLogEntry:
    """What one run did to one table. rows_in: changes merged after collapsing per key;
    rows_out: replica rows inserted + updated + deleted."""

    run_id: str
    table_key: int
    table_name: str
    status: str
    checkpoint_before: int | None
    checkpoint_after: int | None
    windows: int
    ddls_applied: int
    rows_in: int
    rows_out: int
    duration_s: float
    reason: str | None
    started_at: datetime
    finished_at: datetime
    replica: ReplicaFacts | None = None  # None: not read (no replica, or the read failed)


def merge_log_path(layout: LakeLayout) -> str:
    return f"{layout.tidelake_root}/merge_log"


@retry(
    retry=retry_if_exception_type(CommitFailedError),
    stop=stop_after_attempt(8),
    wait=wait_random_exponential(multiplier=0.05, max=2),
    reraise=True,
)
def append_entries(layout: LakeLayout, entries: Sequence[MergeLogEntry]) -> None:
    """Append one run's entries in one commit."""
    if not entries:
        return
    table = open_or_create(layout, merge_log_path(layout), MERGE_LOG_SCHEMA, properties=MERGE_LOG_PROPERTIES,
                           added_columns=1)
    rows = [{**vars(e), "replica": None if e.replica is None else e.replica.to_row()} for e in entries]
    data = pa.Table.from_pylist(rows, schema=MERGE_LOG_SCHEMA)
    write_deltalake(table, data, mode="append", schema_mode="merge")


def open_merge_log(layout: LakeLayout) -> DeltaTable | None:
    path = merge_log_path(layout)
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        return None
    return DeltaTable(path, storage_options=layout.storage_options)


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _us(span: timedelta) -> int:
    return span // timedelta(microseconds=1)


@dataclass(frozen=True)
class _Window:
    """The log and its newest finish time by the files' stats (µs; None when no file has stats,
    which tidelake's writers, delta-rs and Spark, always write: then it is found by reading)."""

    table: DeltaTable
    newest_us: int | None

    @classmethod
    def of(cls, table: DeltaTable) -> _Window:
        actions = pa.table(table.get_add_actions(flatten=True))
        stat = f"max.{_FINISHED}"
        newest = pc.max(pc.cast(actions.column(stat), pa.int64())).as_py() if stat in actions.column_names else None
        return cls(table, newest)

    def read_since(self, start_us: int, columns: list[str] | None = None) -> pa.Table:
        """Rows that finished at or after `start_us`; delta-rs picks the files by their stats."""
        start = EPOCH + timedelta(microseconds=start_us)
        return read_delta(self.table, columns, f"{_FINISHED} >= '{start.isoformat()}'")

    def read_recent(self, columns: list[str] | None = None) -> pa.Table:
        """Rows within RECENT of the newest."""
        if self.newest_us is not None:
            return self.read_since(self.newest_us - _us(RECENT), columns)
        table = read_delta(self.table, columns)
        if table.num_rows == 0:
            return table
        finished = pc.cast(table.column(_FINISHED), pa.int64())
        return table.filter(pc.greater_equal(finished, pc.subtract(pc.max(finished), _us(RECENT))))


def _latest_rows(table: pa.Table) -> pa.Table:
    """The row of each table key that finished last."""
    if table.num_rows == 0:
        return table
    table = table.take(pc.sort_indices(table, [("table_key", "ascending"), (_FINISHED, "ascending")]))
    keys = table.column("table_key").combine_chunks()
    last_of_key = pa.concat_arrays([pc.not_equal(keys[1:], keys[:-1]), pa.array([True])])
    return table.filter(last_of_key)


def last_entries(layout: LakeLayout, keys: set[int] | None = None) -> dict[int, MergeLogEntry]:
    """The latest entry of each table key (by finish time) among those within RECENT of the
    newest entry: of `keys`, or of every key when None. The newest FIRST_LOOK is read first, twice
    as far back each time a key of `keys` is missing, up to RECENT: every row left unread finished
    before every row read. A key without an entry within RECENT is absent (status then reads its
    replica). Only the picked rows become Python objects (status reads this on every call)."""
    table = open_merge_log(layout)
    if table is None:
        return {}
    log = _Window.of(table)
    if log.newest_us is None or keys is None:
        found = _latest_rows(log.read_recent())
    else:
        since, back = log.newest_us - _us(RECENT), _us(FIRST_LOOK)
        while True:
            found = _latest_rows(log.read_since(max(log.newest_us - back, since)))
            if log.newest_us - back <= since or _has_all(found, keys):
                break
            back *= 2
    if keys is not None:
        found = found.filter(pc.is_in(found.column("table_key"), pa.array(sorted(keys), pa.int64())))
    names = [f.name for f in fields(MergeLogEntry)]
    latest: dict[int, MergeLogEntry] = {}
    for row in found.to_pylist():
        row["replica"] = ReplicaFacts.from_row(row.get("replica"))
        latest[row["table_key"]] = MergeLogEntry(**{n: row.get(n) for n in names})
    return latest


def _has_all(found: pa.Table, keys: set[int]) -> bool:
    return (pc.sum(pc.is_in(found.column("table_key"), pa.array(sorted(keys), pa.int64()))).as_py() or 0) >= len(keys)


def recent_entries(layout: LakeLayout, columns: list[str]) -> tuple[pa.Table, datetime | None]:
    """`columns` of every entry that finished within RECENT of the newest one, and when the newest
    finished (None: an empty log); only the files whose stats reach into RECENT are read."""
    table = open_merge_log(layout)
    if table is None:
        return pa.table({c: pa.array([], MERGE_LOG_SCHEMA.field(c).type) for c in columns}), None
    recent = _Window.of(table).read_recent(list(dict.fromkeys([*columns, _FINISHED])))
    if recent.num_rows == 0:
        return recent.select(columns), None
    return recent.select(columns), pc.max(recent.column(_FINISHED)).as_py()


def trim(log: DeltaTable, retention: timedelta) -> tuple[int, int]:
    """Maintenance of the merge log: delete entries that finished `retention` before the newest,
    rewrite the rest ordered by finish time and vacuum what that removed. Returns (rows deleted,
    files compacted). `retention` shorter than RECENT would delete what status and the page read."""
    if retention < RECENT:
        raise InputError(f"merge log retention {retention} is shorter than what status and the page read "
                         f"({RECENT})")
    configured = log.metadata().configuration
    missing = {k: v for k, v in MERGE_LOG_PROPERTIES.items() if configured.get(k) != v}
    if missing:  # a log created before MERGE_LOG_PROPERTIES
        log.alter.set_table_properties(missing, raise_if_not_exists=False)
    newest = _Window.of(log).newest_us
    deleted = 0
    if newest is not None:
        cutoff = newest - _us(retention)
        deleted = int(log.delete(f"{_FINISHED} < '{(EPOCH + timedelta(microseconds=cutoff)).isoformat()}'")
                      ["num_deleted_rows"])
    # Z-order on one column is a sort: each output file holds one range of finish times.
    small = WriterProperties(max_row_group_size=COMPACTED_ROW_GROUP)
    metrics = log.optimize.z_order([_FINISHED], target_size=COMPACTED_FILE_BYTES, writer_properties=small)
    compacted = int(metrics["numFilesRemoved"])
    log.vacuum(VACUUM_HOURS, dry_run=False, full=True)  # older tombstones may have left the log
    return deleted, compacted
