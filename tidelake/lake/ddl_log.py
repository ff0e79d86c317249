"""The `ddl` table: DDL history the merge cuts barriers from (docs/design.md#lake-layout).

One row per DDL job and table it touched (RENAME TABLES, CREATE TABLES touch several), stored
once however often the puller delivers it (tidelake.capture.landing.ddl_writer); rows of the
starting schema snapshot have job_id 0 and the snapshot ts as commit_ts.
Owner: the lander and bootstrap's handoff write it (tidelake.capture.landing.ddl_writer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.compute as pc
from deltalake import DeltaTable

from tidelake.codec.ddl_job import ActionType
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import DdlSource, LakeLayout

if TYPE_CHECKING:
    from tidelake.upstream.schema_tracker import SchemaTracker


@dataclass(frozen=True, slots=True)
class DdlRow:
    """One row of the `ddl` table; ids are 0 where a job has none (e.g. no table for a DB job)."""

    job_id: int
    commit_ts: int  # the job's finished ts; for snapshot rows the snapshot ts
    schema_version: int
    action: int  # TiDB model.ActionType code
    action_name: str
    schema_id: int
    schema_name: str | None
    table_id: int
    table_name: str | None
    query: str | None
    table_info: str | None  # TableInfo JSON after the job
    db_info: str | None  # DBInfo JSON after the job
    source: str  # a DdlSource

    def __post_init__(self) -> None:
        if self.source not in tuple(DdlSource):
            raise InputError(f"ddl row of job {self.job_id} has source {self.source!r}")


def start_snapshot_ts(layout: LakeLayout) -> int | None:
    """The changefeed's start ts: the earliest schema snapshot in the `ddl` table (later snapshot
    rows are tables that joined the running feed); None before anything started it. Lakes started
    before the start row (`snapshot_rows`) have it only if the start schema selected something."""
    if not DeltaTable.is_deltatable(layout.ddl, storage_options=layout.storage_options):
        return None
    table = DeltaTable(layout.ddl, storage_options=layout.storage_options)
    ts = read_delta(table, ["commit_ts"], f"source = {sql_string(DdlSource.SNAPSHOT)}")["commit_ts"]
    return pc.min(ts).as_py() if len(ts) else None


def schema_version_at(layout: LakeLayout, ts: int) -> int | None:
    """The highest schema version the `ddl` table recorded at or below `ts` (None: no row): what
    the upstream's schema version at `ts` can never be below on the same cluster."""
    if not DeltaTable.is_deltatable(layout.ddl, storage_options=layout.storage_options):
        return None
    versions = read_delta(DeltaTable(layout.ddl, storage_options=layout.storage_options), ["schema_version"],
                          f"commit_ts <= {int(ts)}")["schema_version"]
    return pc.max(versions).as_py() if len(versions) else None


def has_snapshot_row(layout: LakeLayout, table_id: int, ts: int) -> bool:
    """Whether the table's schema at `ts` was landed as a `ddl` snapshot row (a feed's start, or
    a table that joined the feed at ts)."""
    if not DeltaTable.is_deltatable(layout.ddl, storage_options=layout.storage_options):
        return False
    table = read_delta(DeltaTable(layout.ddl, storage_options=layout.storage_options), ["table_id"],
                       f"source = {sql_string(DdlSource.SNAPSHOT)} AND commit_ts = {int(ts)}"
                       f" AND table_id = {int(table_id)}")
    return len(table) > 0


def info_json(obj: TableInfo | DBInfo | None) -> str | None:
    """TableInfo/DBInfo as the compact JSON the `ddl` table stores."""
    return None if obj is None else json.dumps(obj.to_json(), separators=(",", ":"), ensure_ascii=False)


def snapshot_rows(tracker: SchemaTracker, schema_version: int) -> list[DdlRow]:
    """The schema at the start ts as `ddl` rows (source snapshot, job id 0, commit ts = start ts):
    a start row, then every selected database and every replicated table, as if created there.

    The start row (action none, no schema, no table) is there even when the filter selects
    nothing yet: the start ts is what every shard and bootstrap read back to agree on where the
    changefeed starts (`start_snapshot_ts`), and an empty cluster must say it too."""
    ts = tracker.ts
    rows = [
        DdlRow(job_id=0, commit_ts=ts, schema_version=schema_version, action=int(ActionType.NONE),
               action_name=ActionType.NONE.label, schema_id=0, schema_name=None, table_id=0, table_name=None,
               query=None, table_info=None, db_info=None, source=DdlSource.SNAPSHOT)
    ]
    rows += [
        DdlRow(job_id=0, commit_ts=ts, schema_version=schema_version, action=int(ActionType.CREATE_SCHEMA),
               action_name=ActionType.CREATE_SCHEMA.label, schema_id=db.id, schema_name=db.name, table_id=0,
               table_name=None, query=None, table_info=None, db_info=info_json(db), source=DdlSource.SNAPSHOT)
        for db in sorted(tracker.selected_dbs(), key=lambda d: d.id)
    ]
    tables = {t.logical_id: t for t in tracker.replicated().values()}
    rows += [
        DdlRow(job_id=0, commit_ts=ts, schema_version=schema_version, action=int(ActionType.CREATE_TABLE),
               action_name=ActionType.CREATE_TABLE.label, schema_id=t.db_id, schema_name=t.db,
               table_id=t.logical_id, table_name=t.table, query=None, table_info=info_json(t.info),
               db_info=None, source=DdlSource.SNAPSHOT)
        for _, t in sorted(tables.items())
    ]
    return rows
