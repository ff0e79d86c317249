"""Watermarks: per physical table resolved ts and the DDL puller's resolved ts (docs/design.md#timestamps-and-watermarks).

Why a separate `watermarks` Delta table, written after the events: Delta has no multi-table
commit, and a watermark must name a changelog state that already holds every event it covers.
So a flush commits (1) the changelog events, (2) the DDL rows, and only then (3) the watermark
rows, each row carrying the changelog and ddl versions that (1) and (2) produced. A crash after
(1) or (2) leaves the old watermarks, which are still true (invariant 1); the events landed
early are re-pulled or de-duplicated by merge (invariant 5).

Readers read the watermarks FIRST, then the changelog at any version >= `changelog_version`
(the latest is fine): the changelog only grows, except retention deletes of partitions that
every replica has merged past, so that read holds every event <= each watermark (invariant 2).
Storing the versions also lets a merge pin its read to exactly `changelog_version` and be
reproducible.

Each puller owns one partition (`puller` = its app id) and rewrites it whole on every flush
(replaceWhere overwrite), so the table stays small, pullers never overwrite each other, and the
rewrite carries the same app transaction as the flush, which makes a retry a no-op. Written
values only ever grow: a restarted puller re-reporting older resolved ts cannot move them back.
The one exception is a retired physical id no merge can need any more: its row leaves with that
rewrite (tidelake.capture.landing.watermark_retirement).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from tidelake.lake.layout import LakeLayout, WatermarkKind

NO_VERSION = -1


@dataclass(frozen=True)
class Watermarks:
    """What merge may rely on: read this first, then the changelog at >= `changelog_version`."""

    table_resolved: dict[int, int]
    ddl_resolved: int
    changelog_version: int
    ddl_version: int = NO_VERSION

    def lagging(self, ts: int, physical_ids: Iterable[int]) -> list[int]:
        """The physical tables among `physical_ids` whose watermark is below `ts`."""
        return [p for p in physical_ids if self.table_resolved.get(p, 0) < ts]

    def reached(self, ts: int, physical_ids: Iterable[int]) -> bool:
        """Whether the DDL watermark and every listed table's watermark are at `ts` or above."""
        return self.ddl_resolved >= ts and not self.lagging(ts, physical_ids)


def fold_watermarks(table: pa.Table) -> Watermarks:
    """Combine rows of one or more pullers: a table's watermark is the lowest any puller claims
    (a table has one owner, so this only matters while ownership moves), versions the highest."""
    resolved: dict[int, int] = {}
    ddl_resolved: int | None = None
    changelog_version = ddl_version = NO_VERSION
    for row in table.to_pylist():
        changelog_version = max(changelog_version, row["changelog_version"])
        ddl_version = max(ddl_version, row["ddl_version"])
        ts = row["resolved_ts"]
        if row["kind"] == WatermarkKind.DDL:
            ddl_resolved = ts if ddl_resolved is None else min(ddl_resolved, ts)
        else:
            tid = row["table_id"]
            resolved[tid] = min(resolved.get(tid, ts), ts)
    return Watermarks(resolved, ddl_resolved or 0, changelog_version, ddl_version)


def read_watermarks(layout: LakeLayout) -> Watermarks:
    """Current watermarks of all pullers; empty (version -1) before the first flush."""
    if not DeltaTable.is_deltatable(layout.watermarks, storage_options=layout.storage_options):
        return Watermarks({}, 0, NO_VERSION)
    table = DeltaTable(layout.watermarks, storage_options=layout.storage_options)
    return fold_watermarks(table.to_pyarrow_table())


@dataclass(frozen=True)
class PullerMarks:
    """One puller's partition: its watermarks and when it last rewrote them (every flush that
    moved them, so a running puller's are at most a flush interval plus retries old)."""

    marks: Watermarks
    updated_at: datetime


def read_by_puller(layout: LakeLayout) -> dict[str, PullerMarks]:
    """Each puller partition, by puller (app id)."""
    if not DeltaTable.is_deltatable(layout.watermarks, storage_options=layout.storage_options):
        return {}
    table = DeltaTable(layout.watermarks, storage_options=layout.storage_options).to_pyarrow_table()
    out = {}
    for name in sorted(set(table.column("puller").to_pylist())):
        rows = table.filter(pc.equal(table.column("puller"), name))
        out[name] = PullerMarks(fold_watermarks(rows), pc.max(rows.column("updated_at")).as_py())
    return out
