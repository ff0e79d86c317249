"""DDL puller: finished DDL jobs from the `mysql.tidb_ddl_job` record span, as TiCDC reads them.

docs/wire.md#ddl-job-storage-as-ticdc-reads-it: the job table (id MaxInt48-1) is subscribed like any table; each Put row
carries the job JSON in column `job_meta` (row format v2). Only jobs in state done count, each
once, with FinishedTS := the row's commit ts; a job at or below the DDL resolved ts already
landed, or with schema version 0, is skipped. Jobs are released in finished-ts order only when the
job span's resolved ts passes them (rows of different regions arrive in no global order, and the
schema must move forward job by job), as TiCDC's DDL puller sorts before it applies.
Owner: the puller runner of shard 0, the one shard that lands DDL.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidelake.capture.puller_errors import PullerError
from tidelake.codec import meta_keys
from tidelake.codec.ddl_job import ActionType, DDLJob
from tidelake.codec.keys import DDL_JOB_TABLE_ID
from tidelake.codec.row import decode_row
from tidelake.codec.row_v2 import parse_row_v2
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.lake.ddl_log import DdlRow, info_json
from tidelake.lake.layout import DdlSource
from tidelake.lake.row_change import RowChange
from tidelake.upstream.schema_snapshot import SnapshotSource
from tidelake.upstream.schema_tracker import JobEffect, SchemaTracker

log = logging.getLogger(__name__)

JOB_META_COLUMN = "job_meta"
JOB_META_COLUMN_ID = 5  # docs/wire.md#tidb_ddl_job-row: sequential ids of the CREATE TABLE statement
TABLE_IDS_COLUMN = "table_ids"
TABLE_IDS_COLUMN_ID = 4
MYSQL_SCHEMA = "mysql"


class JobRowDecoder:
    """Extracts `job_meta` from a tidb_ddl_job row value."""

    def __init__(self, table_info: TableInfo | None) -> None:
        self.table_info = table_info
        column = table_info.column_by_name(JOB_META_COLUMN) if table_info is not None else None
        if table_info is not None and column is None:
            raise PullerError(f"mysql.tidb_ddl_job (table {table_info.id}) has no column {JOB_META_COLUMN!r}")
        self.column_id = column.id if column is not None else JOB_META_COLUMN_ID

    @classmethod
    def load(cls, reader: SnapshotSource, ts: int) -> JobRowDecoder:
        """Use the job table's TableInfo from the meta keys at `ts` when TiDB stored one."""
        start, end = meta_keys.hash_span(meta_keys.DBS)
        for key, value in reader.scan(start, end, ts):
            field_name = meta_keys.decode_meta_key(key).field
            if field_name is None or meta_keys.parse_db_key(field_name) is None:
                continue
            db = DBInfo.from_json(value)
            if db.name.lower() != MYSQL_SCHEMA:
                continue
            raw = reader.get(meta_keys.table_info_key(db.id, DDL_JOB_TABLE_ID), ts)
            return cls(TableInfo.from_json(raw) if raw is not None else None)
        return cls(None)

    def job_meta(self, value: bytes) -> bytes:
        meta = self._column(value, JOB_META_COLUMN, self.column_id)
        if meta is None:
            raise InputError(f"tidb_ddl_job row has no {JOB_META_COLUMN} (column id {self.column_id})")
        return meta

    def table_ids(self, value: bytes) -> set[int]:
        """The tables the job involves: pingcap/tidb pkg/ddl `job2TableIDs` (both tables of an
        EXCHANGE PARTITION, every table of a RENAME TABLES, the old and new id of a TRUNCATE, else
        the job's table id), comma-separated; empty when the row has none."""
        text = self._column(value, TABLE_IDS_COLUMN, TABLE_IDS_COLUMN_ID)
        try:
            return {int(part) for part in (text or b"").decode().split(",") if part.strip()}
        except ValueError:
            raise InputError(f"tidb_ddl_job row's {TABLE_IDS_COLUMN} is {text!r}, not comma-separated ids") from None

    def _column(self, value: bytes, name: str, column_id: int) -> bytes | None:
        if self.table_info is not None:
            if self.table_info.column_by_name(name) is None:
                return None
            found = decode_row(value, self.table_info).get(name)
        else:
            row = parse_row_v2(value)
            found = row.column_bytes(column_id) if column_id in row.spans else None
        if found is None:
            return None
        return found.encode() if isinstance(found, str) else bytes(found)


@dataclass(frozen=True)
class PulledJob:
    """A finished job released in order, with what it did to the feed and its `ddl` rows."""

    job: DDLJob
    finished_ts: int
    effect: JobEffect
    rows: list[DdlRow]


@dataclass(frozen=True)
class Fence:
    """The point in the job sequence at `ts`: every job finished <= ts is applied, none after."""

    ts: int


class DdlPuller:
    """Turns job-table rows and the job span's resolved ts into ordered finished jobs.

    Called from one subscription's worker callbacks, which the feed serialises per table."""

    def __init__(self, decoder: JobRowDecoder, tracker: SchemaTracker, resolved_ts: int) -> None:
        self._decoder = decoder
        self._tracker = tracker
        self._resolved = resolved_ts
        self._pending: dict[int, tuple[int, DDLJob]] = {}  # job id -> (finished ts, job)
        self._fences: set[int] = set()
        self.jobs_seen = 0

    @property
    def resolved_ts(self) -> int:
        return self._resolved

    @property
    def tracker(self) -> SchemaTracker:
        return self._tracker

    def on_rows(self, rows: list[RowChange]) -> None:
        """Buffer the done jobs among `rows` (docs/wire.md#tidb_ddl_job-row)."""
        for row in rows:
            if row.op != "put":
                continue  # TiDB deletes the row once the job is synced
            try:
                job = DDLJob.from_json(self._decoder.job_meta(row.value))
            except InputError as exc:
                raise PullerError(f"DDL job row {row.key.hex()} at commit ts {row.commit_ts}: {exc}") from exc
            if not job.is_done() or job.schema_version == 0 or row.commit_ts <= self._resolved:
                continue
            if job.id in self._pending:
                continue
            job.start_ts = row.start_ts
            job.finished_ts = row.commit_ts
            self._pending[job.id] = (row.commit_ts, job)
            self.jobs_seen += 1

    def add_fence(self, ts: int) -> None:
        """Have on_resolved return a Fence at `ts` in job order (a table joining every shard's
        feed at the same point, tidelake.capture.changefeed.table_joins); `ts` must be ahead of resolved."""
        if ts <= self._resolved:
            raise ValueError(f"fence {ts} is not ahead of the DDL resolved ts {self._resolved}")
        self._fences.add(ts)

    def on_resolved(self, ts: int) -> list[PulledJob | Fence]:
        """Release the buffered jobs finished at or below `ts`, oldest first, applied in turn,
        with the fences <= ts after the jobs at or below them."""
        if ts <= self._resolved:
            return []
        ready = sorted((v for v in self._pending.values() if v[0] <= ts), key=lambda v: (v[0], v[1].id))
        fences = sorted(f for f in self._fences if f <= ts)
        self._fences.difference_update(fences)
        out: list[PulledJob | Fence] = []
        for finished_ts, job in ready:
            while fences and fences[0] < finished_ts:
                out.append(Fence(fences.pop(0)))
            del self._pending[job.id]
            effect = self._tracker.apply(job, finished_ts)
            rows = job_rows(job, finished_ts, effect) if effect.relevant else []
            log.info("DDL job %d (%s) finished at %d: %s; joined %s, left %s", job.id, job.action_label,
                     finished_ts, job.query or "-", sorted(effect.joined), sorted(effect.left))
            out.append(PulledJob(job, finished_ts, effect, rows))
        out.extend(Fence(f) for f in fences)
        self._resolved = ts
        return out


def job_rows(job: DDLJob, finished_ts: int, effect: JobEffect) -> list[DdlRow]:
    """The job's `ddl` rows: one, keyed by the table the job acted on (for TRUNCATE the old id,
    with the new table in table_info, as TiDB's job has it), or one per table of a multi-table job,
    with the table as the job left it: RENAME TABLES lists a table once per pair naming it (a
    swap a->tmp, b->a, tmp->b lists a as tmp, then as b), so the last info of each id is kept and
    no intermediate name reaches the history (pingcap/ticdc#4430)."""
    common = dict(
        job_id=job.id, commit_ts=finished_ts, schema_version=job.schema_version, action=int(job.type),
        action_name=job.action_label, query=job.query or None, db_info=info_json(job.db_info), source=DdlSource.JOB,
    )
    if job.type == ActionType.EXCHANGE_TABLE_PARTITION and job.table_info is not None:
        return _exchange_rows(job, effect, common)
    if job.multiple_table_infos:
        after = {t.logical_id: t for t in effect.touched}
        return [
            DdlRow(schema_id=after[info.id].db_id if info.id in after else job.schema_id,
                   schema_name=after[info.id].db if info.id in after else job.schema_name or None,
                   table_id=info.id, table_name=info.name, table_info=info_json(info), **common)
            for info in {info.id: info for info in job.multiple_table_infos}.values()
        ]
    info = job.table_info
    return [DdlRow(schema_id=job.schema_id, schema_name=job.schema_name or None,
                   table_id=job.table_id or (info.id if info is not None else 0),
                   table_name=info.name if info is not None else job.table_name or None,
                   table_info=info_json(info), **common)]




def _exchange_rows(job: DDLJob, effect: JobEffect, common: dict) -> list[DdlRow]:
    """EXCHANGE PARTITION: the job is the normal table's (job.table_id) and its binlog info the
    partitioned table's after the swap (pkg/ddl executor.go ExchangeTablePartition). One row each,
    for the tables the changefeed replicates: the partitioned table's, and the normal table's keyed
    by its id before the job with its info after (it now has the exchanged partition's id)."""
    pt = job.table_info
    normal = [t for t in effect.touched if t.logical_id not in (pt.id, job.table_id)]
    rows = []
    if pt.id in effect.replicated:
        db = next((t for t in effect.touched if t.logical_id == pt.id), None)
        rows.append(DdlRow(schema_id=db.db_id if db else job.schema_id, schema_name=db.db if db else None,
                           table_id=pt.id, table_name=pt.name, table_info=info_json(pt), **common))
    for t in normal:
        if t.logical_id in effect.replicated:
            rows.append(DdlRow(schema_id=t.db_id, schema_name=t.db, table_id=job.table_id, table_name=t.table,
                               table_info=info_json(t.info), **common))
    return rows
