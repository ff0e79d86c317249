"""Watermarks: per physical table resolved ts and the DDL puller's resolved ts, read (docs/design.md#timestamps-and-watermarks).

Written after the changelog and DDL commits they cover, each row naming the changelog version that
holds every event below it (invariant 1); read FIRST, then the changelog at any later version
(invariant 2). Each puller rewrites only its own partition. Owner: the lander writes them
(tidelake.capture.landing.watermark_writer).

More: docs/internals.md#watermarks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from tidelake.lake.delta_read import read_delta
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
    return fold_watermarks(read_delta(table))


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
    table = read_delta(DeltaTable(layout.watermarks, storage_options=layout.storage_options))
    out = {}
    for name in sorted(set(table.column("puller").to_pylist())):
        rows = table.filter(pc.equal(table.column("puller"), name))
        out[name] = PullerMarks(fold_watermarks(rows), pc.max(rows.column("updated_at")).as_py())
    return out
