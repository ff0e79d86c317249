"""Append path of the changelog: one flush is one Delta commit carrying an app transaction
(tidelake.capture.landing.app_txn says how a flush lands once). Owner: the lander."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from deltalake import WriterProperties, write_deltalake

from tidelake.capture.landing.app_txn import AppTxnTable, commit_once, commit_properties
from tidelake.errors import InputError
from tidelake.lake.commit_buckets import bucket_seconds_of, commit_buckets
from tidelake.lake.flush_stamps import stamps_metadata
from tidelake.lake.layout import (
    BUCKET_SECONDS_PROPERTY,
    CHANGELOG_PARTITIONS,
    CHANGELOG_SCHEMA,
    DEFAULT_BUCKET_SECONDS,
    LakeLayout,
    open_or_create,
)
from tidelake.lake.log_cleanup import POST_COMMIT
from tidelake.lake.row_change import RowChange


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


# A flush's write path, sized so its working memory stays small and flat: rows converted to Arrow
# per slice (larger slices held more RSS), row groups of at most ROW_GROUP_ROWS, files cut at
# CHANGELOG_FILE_BYTES.
APPEND_SLICE_ROWS = 2048
ROW_GROUP_ROWS = 8192
CHANGELOG_FILE_BYTES = 16 << 20


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

        properties = commit_properties(self.app_id, seq, writer,
                                       stamps_metadata((r.table_id, r.commit_ts) for r in rows))

        def write() -> None:
            write_deltalake(
                self._table,
                pa.RecordBatchReader.from_batches(CHANGELOG_SCHEMA, slices()),
                mode="append",
                target_file_size=CHANGELOG_FILE_BYTES,
                writer_properties=WriterProperties(max_row_group_size=ROW_GROUP_ROWS),
                commit_properties=properties,
                post_commithook_properties=POST_COMMIT,
            )

        return commit_once(self._table, self.app_id, seq, self.committed_seq, write, "changelog", writer)
