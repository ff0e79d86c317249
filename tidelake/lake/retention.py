"""Changelog retention: drop whole partitions every replica has merged past.

Only buckets entirely at or below a table's checkpoint go, so the predicate names partition
columns alone and the delete is metadata-only (remove actions, no Parquet rewritten); files
disappear from disk at the next VACUUM. It never touches the buckets the lander appends to,
because new events have commit ts above every checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping

from deltalake import DeltaTable

from tidelake.lake.changelog_writer import bucket_label, bucket_seconds_of
from tidelake.lake.layout import LakeLayout


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
