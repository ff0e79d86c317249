"""Compaction of the changelog's closed commit buckets, by the puller that wrote them.

A bucket of physical table t is closed once the durable watermark of t is past its end: no
change of t lands there any more, so its flush files are rewritten into a few (a dataChange=false
commit, rows unchanged) without racing the lander, other shards or merges. Owner: the lander,
on its own thread.

More: docs/internals.md#bucket_compaction.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

import pyarrow as pa
from deltalake import DeltaTable

from tidelake.capture.landing.changelog_writer import CHANGELOG_FILE_BYTES
from tidelake.lake.commit_buckets import bucket_label, bucket_seconds_of
from tidelake.lake.damage import first_line
from tidelake.lake.layout import LakeLayout
from tidelake.lake.store_room import refusal

log = logging.getLogger(__name__)

# A file below the flush file cut is a flush's leftover; two of them in a closed bucket make it worth a rewrite.
SMALL_FILE_BYTES = CHANGELOG_FILE_BYTES
COMPACTED_FILE_BYTES = 128 << 20  # the rewrite's target file size


def closed_buckets_to_compact(table: DeltaTable, resolved: Mapping[int, int]) -> dict[int, list[str]]:
    """Per physical table id of `resolved`, its closed buckets holding two or more small files."""
    if not resolved:
        return {}
    seconds = bucket_seconds_of(table)
    first_open = {tid: bucket_label(ts + 1, seconds) for tid, ts in resolved.items()}
    files = pa.table(table.get_add_actions(flatten=True)).select(
        ["partition.table_id", "partition.commit_bucket", "size_bytes"]).to_pylist()
    small: dict[tuple[int, str], int] = {}
    for f in files:
        tid, bucket = int(f["partition.table_id"]), f["partition.commit_bucket"]
        if tid in first_open and bucket < first_open[tid] and f["size_bytes"] < SMALL_FILE_BYTES:
            small[(tid, bucket)] = small.get((tid, bucket), 0) + 1
    out: dict[int, list[str]] = {}
    for (tid, bucket), count in sorted(small.items()):
        if count >= 2:
            out.setdefault(tid, []).append(bucket)
    return out


def compact_buckets(table: DeltaTable, table_id: int, buckets: list[str]) -> int:
    """Rewrite the given buckets of one table id (one commit); the number of files removed."""
    metrics = table.optimize.compact(
        partition_filters=[("table_id", "=", str(table_id)), ("commit_bucket", "in", buckets)],
        target_size=COMPACTED_FILE_BYTES,
    )
    return int(metrics["numFilesRemoved"])


class BucketCompactor:
    """A thread compacting the closed buckets of the tables a lander lands, every `interval_s`."""

    def __init__(self, layout: LakeLayout, durable: Callable[[], dict[int, int]], interval_s: float,
                 on_compacted: Callable[[int], None] = lambda files: None, name: str = "changelog") -> None:
        self._layout = layout
        self._durable = durable
        self._interval = interval_s
        self._on_compacted = on_compacted
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"compact-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the rewrite in progress (if any) commits or fails."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def compact_once(self) -> int:
        """One round: every closed bucket worth it, one commit per table id; files removed."""
        layout = self._layout
        if not DeltaTable.is_deltatable(layout.changelog, storage_options=layout.storage_options):
            return 0
        table = DeltaTable(layout.changelog, storage_options=layout.storage_options)
        removed = 0
        for table_id, buckets in closed_buckets_to_compact(table, self._durable()).items():
            if self._stop.is_set():
                break
            removed += compact_buckets(table, table_id, buckets)
        return removed

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                removed = self.compact_once()
            except Exception as exc:  # housekeeping: a failed round must never stop landing
                cause = refusal(exc)
                if cause is None:
                    log.exception("compacting closed changelog buckets failed; retrying in %.0f s", self._interval)
                else:  # the lander says landing paused; one line per round here, not a trace
                    log.warning("compacting closed changelog buckets waits: %s (%s); retrying in %.0f s", cause,
                                first_line(exc), self._interval)
                continue
            if removed:
                self._on_compacted(removed)
                log.info("compacted closed changelog buckets: %d small files rewritten", removed)
