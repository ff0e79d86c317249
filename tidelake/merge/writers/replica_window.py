"""One window (lo, hi] of one replica, as both writers take it, and what a writer is. Owner:
tidelake.merge.table_merge, which opens the replica once per window and hands it over."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from tidelake.codec.schema import TableInfo
from tidelake.lake.checkpoint import CHECKPOINT_METADATA_KEY, MERGE_APP_ID, metadata_int
from tidelake.merge.changelog_snapshot import WindowKeys
from tidelake.merge.table_plan import FileStat, estimated_rows
from tidelake.merge.replica_handles import ReplicaHandle
from tidelake.merge.window_spec import Removal


@dataclass(frozen=True)
class ReplicaWindow:
    """The changes (lo, hi] of `physical_ids`, decoded with `info`, for the replica at `path`."""

    path: str
    replica: DeltaTable  # the replica's log, opened once for this window
    target: StructType  # the replica's schema
    info: TableInfo
    physical_ids: tuple[int, ...]
    lo: int
    hi: int
    stats: Sequence[FileStat]  # changelog file stats of the window's physical ids
    shared: tuple[DataFrame, WindowKeys] | None = None  # the run pass's read of it (Spark only)
    removal: Removal | None = None  # a DDL's last window: the rows the DDL removes leave in its commit
    handle: ReplicaHandle | None = None  # `replica`'s handle, which knows its checkpoint after its own commits

    @cached_property
    def recorded(self) -> int | None:
        """The replica's checkpoint when the window was opened (read once: a read walks the log's txns;
        none when the handle knows it)."""
        if self.handle is not None:
            return self.handle.checkpoint()
        return self.replica.transaction_version(MERGE_APP_ID)

    @property
    def empty(self) -> bool:
        """No changelog file holds a change of the window."""
        return not any(s.max_ts > self.lo and s.min_ts <= self.hi for s in self.stats)

    @property
    def estimated_rows(self) -> float:
        return estimated_rows(self.stats, self.lo, self.hi)


class WindowWriter(Protocol):
    """Applies a window in ONE commit of the replica that records checkpoint hi (invariant 3)."""

    def write(self, window: ReplicaWindow) -> tuple[int, int]:
        """(changes merged, replica rows written)."""
        ...


def commit_metrics(window: ReplicaWindow, version_before: int, keys: int | None = None) -> tuple[int, int]:
    """(changes merged, replica rows written) of the commit that recorded the window's hi, read
    from the commits after `version_before` on the window's own handle; (0, 0) when Delta skipped
    the write (its txn recorded already). An append's changes are the window's `keys`."""
    replica = window.replica
    replica.update_incremental()
    commit = next((c for c in replica.history(max(replica.version() - version_before, 1))
                   if metadata_int(c, CHECKPOINT_METADATA_KEY) == window.hi and c["version"] > version_before), None)
    if commit is None:
        return 0, 0
    m = commit.get("operationMetrics") or {}
    if commit.get("operation") == "WRITE":
        return keys or 0, int(m.get("numOutputRows", 0))
    written = sum(int(m.get(k, 0)) for k in ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"))
    return int(m.get("numSourceRows", 0)), written
