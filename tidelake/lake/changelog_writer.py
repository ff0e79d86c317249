"""Append path of the changelog: one flush is one Delta commit carrying an app transaction.

delta-rs records a `txn` action but, unlike Spark's `txnAppId/txnVersion` writer options, does
not skip a write whose version is already recorded, so the check is ours: a flush is skipped
when the table's transaction version for our app id is already >= its sequence. The check reads
the same snapshot the commit is built on, so if another process committed the same app id in
between (a zombie puller), delta-rs's conflict checker rejects our commit instead of landing
twice (docs/stack.md §11 idempotent writes; Delta protocol SetTransaction). Every commit's
commitInfo names the app, the flush sequence and the writer instance, so a retry can tell its
own lost-ack commit from another process's (`writer_of`).

Other writers share these tables: changelog retention deletes merged buckets while the puller
appends, and delta-rs rejects an append that raced a delete ("a concurrent transaction deleted
data this operation read"). Such a conflict is no second puller (no commit of our app id came
in between), so `commit_once` rebuilds the commit on the new snapshot instead of stopping.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError

from tidelake.errors import InputError, TidelakeError
from tidelake.lake.layout import (
    BUCKET_FORMAT,
    BUCKET_SECONDS_PROPERTY,
    CHANGELOG_PARTITIONS,
    CHANGELOG_SCHEMA,
    DEFAULT_BUCKET_SECONDS,
    LakeLayout,
    open_or_create,
)
from tidelake.lake.row_change import RowChange
from tidelake.tso import PHYSICAL_SHIFT_BITS


class LakeConflictError(TidelakeError):
    """Another process committed under our app id: two pullers run the same changefeed."""


class LakeBusyError(TidelakeError):
    """Commits kept losing races to other writers' commits; the flush is retried later."""


def bucket_seconds_of(table: DeltaTable) -> int:
    """Commit-bucket size the table was created with (the table, not the config, is the truth)."""
    raw = table.metadata().configuration.get(BUCKET_SECONDS_PROPERTY)
    if raw is None:
        return DEFAULT_BUCKET_SECONDS
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds <= 0:
        raise InputError(f"table property {BUCKET_SECONDS_PROPERTY}={raw!r} is not a positive int")
    return seconds


def commit_buckets(commit_ts: pa.Array, bucket_seconds: int) -> pa.Array:
    """`commit_bucket` partition values: UTC start of the bucket holding each TSO's physical time."""
    physical_ms = pc.shift_right(commit_ts, PHYSICAL_SHIFT_BITS)  # tidelake/tso.py layout
    bucket_ms = bucket_seconds * 1000
    start_ms = pc.multiply(pc.divide(physical_ms, bucket_ms), bucket_ms)
    distinct = pc.unique(start_ms)
    labels = pc.strftime(distinct.cast(pa.timestamp("ms", tz="UTC")), format=BUCKET_FORMAT)
    return pc.take(labels, pc.index_in(start_ms, value_set=distinct))


def bucket_label(ts: int, bucket_seconds: int) -> str:
    """Partition value of the bucket holding TSO `ts`."""
    return commit_buckets(pa.array([ts], pa.int64()), bucket_seconds)[0].as_py()


def rows_to_arrow(rows: Sequence[RowChange], flush_seq: int, bucket_seconds: int) -> pa.Table:
    """Columnar form of a batch (its ops were checked when the lander buffered it)."""
    commit_ts = pa.array([r.commit_ts for r in rows], pa.int64())
    columns = [
        pa.array([r.table_id for r in rows], pa.int64()),
        commit_buckets(commit_ts, bucket_seconds),
        commit_ts,
        pa.array([r.start_ts for r in rows], pa.int64()),
        pa.array([r.op for r in rows], pa.string()),
        pa.array([r.key for r in rows], pa.binary()),
        pa.array([r.value for r in rows], pa.binary()),
        pa.array([r.old_value for r in rows], pa.binary()),
        pa.array([r.region_id for r in rows], pa.int64()),
        pa.repeat(pa.scalar(flush_seq, pa.int64()), len(rows)),
    ]
    return pa.Table.from_arrays(columns, schema=CHANGELOG_SCHEMA)


# A flush's write path, sized so its working memory stays small and flat (bench/README.md "Memory
# under backpressure"): rows converted to Arrow per slice (8192-row slices cost ~20 MiB more RSS
# than 2048), row groups of at most ROW_GROUP_ROWS, files cut at CHANGELOG_FILE_BYTES.
APPEND_SLICE_ROWS = 2048
ROW_GROUP_ROWS = 8192
CHANGELOG_FILE_BYTES = 16 << 20

# How far back a retry looks for the commit of its own sequence (only retries pay for this).
WRITER_LOOKBACK_COMMITS = 200


def commit_properties(app_id: str, seq: int, writer: str = "") -> CommitProperties:
    """App transaction (app_id, seq) plus commitInfo naming the flush and the writer instance."""
    return CommitProperties(
        app_transactions=[Transaction(app_id, seq)],
        custom_metadata={"tidelake.app": app_id, "tidelake.flush_seq": str(seq),
                         "tidelake.writer": writer},
    )


def writer_of(table: DeltaTable, app_id: str, seq: int) -> str | None:
    """Writer instance whose commit recorded (app_id, seq), from recent commitInfo; None if not
    found. Lets a retry tell its own lost-ack commit from a second puller's."""
    table.update_incremental()
    for commit in table.history(WRITER_LOOKBACK_COMMITS):
        if commit.get("tidelake.app") == app_id and commit.get("tidelake.flush_seq") == str(seq):
            return commit.get("tidelake.writer")
    return None


class AppTxnTable:
    """A tidelake table written by one app id with idempotent flush sequences (Delta app
    transactions): what the changelog, ddl and watermarks writers share."""

    def __init__(self, table: DeltaTable, app_id: str) -> None:
        self._table = table
        self.app_id = app_id

    def version(self) -> int:
        """Latest table version (includes other writers' commits)."""
        self._table.update_incremental()
        return self._table.version()

    def committed_seq(self) -> int:
        """Highest flush sequence of our app id already in the table (0 if none)."""
        self._table.update_incremental()
        return self._table.transaction_version(self.app_id) or 0

    def writer_of(self, seq: int) -> str | None:
        return writer_of(self._table, self.app_id, seq)


# Rebuilds of a commit that lost a race to another app's commit before the lander's slower retry.
FOREIGN_CONFLICT_RETRIES = 6


def commit_once(
    table: DeltaTable,
    app_id: str,
    seq: int,
    committed_seq: Callable[[], int],
    write: Callable[[], None],
    what: str,
    writer: str = "",
) -> bool:
    """Run `write` (one commit carrying (app_id, seq) and `writer` in its commitInfo); False if
    `seq` was already recorded, before or by this very write (told by `writer`).

    A commit conflict means a second puller only when a commit of OUR app id came in between:
    then LakeConflictError. Otherwise another writer won the race and the commit is rebuilt on
    the new snapshot; LakeBusyError (transient) if that keeps happening."""
    attempt = 0
    while True:
        before = committed_seq()
        if before >= seq:
            return False
        try:
            write()
            return True
        except CommitFailedError as exc:
            table.update_incremental()
            recorded = table.transaction_version(app_id) or 0
            if recorded >= seq and writer and writer_of(table, app_id, seq) == writer:
                # This very write landed: on an object store, a commit whose 2xx was lost is
                # retried by the client as a conditional PUT, which then fails against itself.
                return False
            if recorded != before:
                raise LakeConflictError(
                    f"{what} commit of {app_id} flush {seq} lost a commit conflict to a commit of the "
                    f"same app id: is a second puller running this changefeed? {exc}"
                ) from exc
            if attempt == FOREIGN_CONFLICT_RETRIES:
                raise LakeBusyError(
                    f"{what} commit of {app_id} flush {seq} lost {attempt + 1} commit races to other "
                    f"writers; it will be retried: {exc}"
                ) from exc
            time.sleep(random.uniform(0, 0.05 * 2**attempt))
            attempt += 1


class ChangelogWriter(AppTxnTable):
    """Appends batches of raw row changes for one app id (one changefeed's puller)."""

    def __init__(
        self, layout: LakeLayout, app_id: str, bucket_seconds: int = DEFAULT_BUCKET_SECONDS
    ) -> None:
        if bucket_seconds <= 0:
            raise InputError(f"commit bucket size must be positive, got {bucket_seconds} s")
        table = open_or_create(
            layout,
            layout.changelog,
            CHANGELOG_SCHEMA,
            CHANGELOG_PARTITIONS,
            {BUCKET_SECONDS_PROPERTY: str(bucket_seconds)},
        )
        super().__init__(table, app_id)
        self.bucket_seconds = bucket_seconds_of(self._table)

    def append(self, rows: Sequence[RowChange], seq: int, writer: str = "") -> bool:
        """Land `rows` as flush `seq` (one commit); False if that flush had already landed (a retry).

        The rows go to delta-rs as a stream of APPEND_SLICE_ROWS-row slices, so the write holds one
        slice's Arrow copy and one row group's Parquet buffers, not copies of the whole flush."""

        def slices() -> Iterator[pa.RecordBatch]:
            for first in range(0, len(rows), APPEND_SLICE_ROWS):
                yield from rows_to_arrow(rows[first:first + APPEND_SLICE_ROWS], seq, self.bucket_seconds).to_batches()

        def write() -> None:
            write_deltalake(
                self._table,
                pa.RecordBatchReader.from_batches(CHANGELOG_SCHEMA, slices()),
                mode="append",
                target_file_size=CHANGELOG_FILE_BYTES,
                writer_properties=WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
                commit_properties=commit_properties(self.app_id, seq, writer),
            )

        return commit_once(self._table, self.app_id, seq, self.committed_seq, write, "changelog", writer)
