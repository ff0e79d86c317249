"""Changelog retention with delta-rs, run by maintenance: drop whole partitions every replica has
merged past, vacuum (closed buckets are compacted by their lander: bucket_compaction). Pullers
append meanwhile; on an object store only delta-rs commits with a conditional PUT, so Spark never
writes the changelog (docs/stack.md#object-store-the-lake-on-s3).

Only buckets entirely at or below a table's checkpoint go, so the predicate names partition
columns alone and the delete is metadata-only (remove actions, no Parquet rewritten); files
disappear at the next VACUUM. New events have commit ts above every checkpoint, so it never
touches the buckets the lander appends to. Owner: `tidelake maintenance` (tidelake.maintenance.lake_upkeep).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from deltalake import DeltaTable

from tidelake.lake.commit_buckets import bucket_label, bucket_seconds_of
from tidelake.lake.layout import LakeLayout

# Delta's default: a shorter retention must be asked for explicitly (docs/stack.md#delta-lake-deltatable-python-api-and-write-options).
DEFAULT_VACUUM_RETENTION_HOURS = 168.0
FULL_VACUUM_MIN_HOURS = 1.0  # a flush writes and commits its files within seconds


def delete_merged_changelog(layout: LakeLayout, checkpoints: Mapping[int, int]) -> int:
    """Delete changelog partitions of each physical table id whose events are all <= its
    checkpoint; returns the number of rows removed. One commit for all tables."""
    if not checkpoints or not DeltaTable.is_deltatable(
        layout.changelog, storage_options=layout.storage_options
    ):
        return 0
    table = DeltaTable(layout.changelog, storage_options=layout.storage_options)
    seconds = bucket_seconds_of(table)
    # Every ts in a bucket that starts before bucket(checkpoint + 1) is <= checkpoint.
    predicate = " OR ".join(
        f"(table_id = {int(tid)} AND commit_bucket < '{bucket_label(ckpt + 1, seconds)}')"
        for tid, ckpt in sorted(checkpoints.items())
    )
    metrics = table.delete(predicate)
    return int(metrics.get("num_deleted_rows", 0))


def open_changelog(layout: LakeLayout) -> DeltaTable | None:
    """The changelog table, None before the first puller created it."""
    if not DeltaTable.is_deltatable(layout.changelog, storage_options=layout.storage_options):
        return None
    return DeltaTable(layout.changelog, storage_options=layout.storage_options)


def vacuum_changelog(changelog: DeltaTable, retention_hours: float) -> None:
    """Delete files no version within `retention_hours` references (rounded up to whole hours).
    From FULL_VACUUM_MIN_HOURS on, the table's folder is listed: the tombstones of older removals
    may have left the log already. Below it only the log's tombstones are deleted: a listing would
    also take the files a puller has written and not committed yet (younger than the retention)."""
    hours = math.ceil(retention_hours)
    changelog.vacuum(hours, dry_run=False, full=hours >= FULL_VACUUM_MIN_HOURS,
                     enforce_retention_duration=hours >= DEFAULT_VACUUM_RETENTION_HOURS)
