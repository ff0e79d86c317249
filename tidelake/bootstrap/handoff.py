"""Where the changefeed picks up after a snapshot at T: a replica with checkpoint T plus the
changelog from T is complete, with no gap and no overlap (a read at T holds the commits <= T, a
feed from T delivers those > T). Owner: bootstrap, per table, from what the lake says.

More: docs/internals.md#handoff.
"""

from __future__ import annotations

import uuid

from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.codec.schema import TableInfo
from tidelake.lake.ddl_log import has_snapshot_row, snapshot_rows, start_snapshot_ts
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import SchemaSnapshot
from tidelake.upstream.schema_tracker import SchemaTracker
from tidelake.upstream.upstream_errors import UpstreamError

BOOTSTRAP_APP_PREFIX = "tidelake-bootstrap/"


class HandoffError(UpstreamError):
    """The changefeed's start moved under us (a puller started it at another ts)."""


def claim_start(layout: LakeLayout, changefeed_id: str, snapshot: SchemaSnapshot, table_filter: TableFilter) -> None:
    """Land the schema at T = snapshot.ts as the changefeed's start (idempotent per T)."""
    def no_reload(ts: int) -> SchemaSnapshot:
        raise HandoffError(f"schema reload at {ts} is not expected while claiming a start")

    tracker = SchemaTracker(snapshot, table_filter, no_reload)
    # A writer id lets a commit whose acknowledgement the store lost count as ours (commit_once).
    DdlWriter(layout, BOOTSTRAP_APP_PREFIX + changefeed_id).insert(snapshot_rows(tracker, snapshot.schema_version),
                                                                 snapshot.ts, writer=uuid.uuid4().hex)
    landed = start_snapshot_ts(layout)
    if landed != snapshot.ts:
        raise HandoffError(
            f"changefeed {changefeed_id} started at ts {landed} while bootstrap claimed {snapshot.ts} "
            "(a puller started it concurrently): rerun bootstrap, it will read at the changefeed's start"
        )


def fed_by_changefeed(layout: LakeLayout, start_ts: int, info: TableInfo, physical_ids: list[int]) -> bool:
    """Whether the changelog covers the table from the changefeed's start on (see module doc)."""
    watermarks = read_watermarks(layout)
    if watermarks.table_resolved:
        return all(pid in watermarks.table_resolved for pid in physical_ids)
    return has_snapshot_row(layout, info.id, start_ts)
