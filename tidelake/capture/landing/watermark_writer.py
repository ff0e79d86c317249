"""The puller's side of the watermarks table: each puller rewrites its own partition per flush
(tidelake.lake.watermarks says why the table is written last and read first).
Owner: the lander; resharding (tidelake.capture.changefeed.reshard) drops retired pullers' rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from tidelake.capture.landing.app_txn import AppTxnTable, commit_once, commit_properties
from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import (
    WATERMARKS_PARTITIONS,
    WATERMARKS_PROPERTIES,
    WATERMARKS_SCHEMA,
    LakeLayout,
    WatermarkKind,
    open_or_create,
)
from tidelake.lake.log_cleanup import POST_COMMIT
from tidelake.lake.watermarks import Watermarks, fold_watermarks


def delete_pullers(layout: LakeLayout, pullers: list[str]) -> None:
    """Drop the partitions of pullers that no longer run (a changefeed's previous shard layout)."""
    table = DeltaTable(layout.watermarks, storage_options=layout.storage_options)
    table.delete(" OR ".join(f"puller = {sql_string(name)}" for name in pullers))


def _with_current_properties(table: DeltaTable) -> DeltaTable:
    """A watermarks table created by an earlier version lacks WATERMARKS_PROPERTIES (its reads
    then grow with the run): set them, a metadata-only commit; another shard setting them first
    is as good."""
    configured = table.metadata().configuration
    missing = {k: v for k, v in WATERMARKS_PROPERTIES.items() if configured.get(k) != v}
    if missing:
        try:
            table.alter.set_table_properties(missing, raise_if_not_exists=False)
        except CommitFailedError:
            pass
        table.update_incremental()
    return table


class WatermarkWriter(AppTxnTable):
    """Rewrites one puller's partition of the watermarks table."""

    def __init__(self, layout: LakeLayout, puller: str) -> None:
        self.puller = puller
        table = open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA, WATERMARKS_PARTITIONS,
                               WATERMARKS_PROPERTIES)
        super().__init__(_with_current_properties(table), puller)

    def load(self) -> Watermarks:
        """This puller's durable watermarks."""
        self._table.update_incremental()
        rows = read_delta(self._table, where=f"puller = {sql_string(self.puller)}")
        return fold_watermarks(rows)

    def write(
        self,
        table_resolved: Mapping[int, int],
        ddl_resolved: int,
        changelog_version: int,
        ddl_version: int,
        seq: int,
        writer: str = "",
    ) -> bool:
        """Replace this puller's rows as flush `seq`; False if that flush already wrote them."""
        ids = sorted(table_resolved)
        n = len(ids) + 1
        data = pa.Table.from_arrays(
            [
                pa.repeat(pa.scalar(self.puller), n),
                pa.array([WatermarkKind.TABLE] * len(ids) + [WatermarkKind.DDL]),
                pa.array(ids + [0], pa.int64()),
                pa.array([table_resolved[t] for t in ids] + [ddl_resolved], pa.int64()),
                pa.repeat(pa.scalar(changelog_version, pa.int64()), n),
                pa.repeat(pa.scalar(ddl_version, pa.int64()), n),
                pa.repeat(pa.scalar(seq, pa.int64()), n),
                pa.repeat(pa.scalar(datetime.now(timezone.utc), pa.timestamp("us", tz="UTC")), n),
            ],
            schema=WATERMARKS_SCHEMA,
        )

        def write() -> None:
            write_deltalake(
                self._table,
                data,
                mode="overwrite",
                predicate=f"puller = {sql_string(self.puller)}",
                commit_properties=commit_properties(self.puller, seq, writer),
                post_commithook_properties=POST_COMMIT,
            )

        return commit_once(self._table, self.puller, seq, self.committed_seq, write, "watermarks", writer)
