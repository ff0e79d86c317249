"""The puller's in-memory schema: which physical table ids to feed, and what they belong to. It
starts from the schema snapshot at the feed's start ts and moves forward with every finished DDL
job, as TiCDC's schema storage does (docs/metadata.md#how-ticdc-builds-its-initial-schema-snapshot).
Owner: the changefeed's DDL puller.

More: docs/internals.md#schema_tracker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tidelake.codec.ddl_job import ActionType, DDLJob, copied_physical_ids
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.table_filter import TableFilter, is_system_schema
from tidelake.table_names import table_key
from tidelake.upstream.schema_snapshot import (
    MAX_USER_GLOBAL_ID,
    SchemaSnapshot,
    has_rows,
)

_SCHEMA_ACTIONS = frozenset({
    ActionType.CREATE_SCHEMA,
    ActionType.MODIFY_SCHEMA_CHARSET_AND_COLLATE,
    ActionType.MODIFY_SCHEMA_DEFAULT_PLACEMENT,
    ActionType.MODIFY_SCHEMA_READ_ONLY,
})
_DROP_ACTIONS = frozenset({ActionType.DROP_TABLE, ActionType.DROP_VIEW, ActionType.DROP_SEQUENCE})
# Jobs touching several objects whose binlog does not say where each one ends up.
_RELOAD_ACTIONS = frozenset({
    ActionType.RENAME_TABLES,
    ActionType.EXCHANGE_TABLE_PARTITION,
    ActionType.RECOVER_SCHEMA,
    ActionType.ALTER_TABLE_PARTITIONING,
    ActionType.REMOVE_PARTITIONING,
})


@dataclass(frozen=True)
class TrackedTable:
    """A replicated table as one of its physical ids sees it (partitions map to their table)."""

    db_id: int
    db: str
    table: str
    logical_id: int
    info: TableInfo = field(compare=False, repr=False)

    @property
    def key(self) -> str:
        """The table's name as tidelake.table_names.table_key compares it."""
        return table_key(self.db, self.table)


@dataclass(frozen=True)
class JobEffect:
    """What one DDL job changed for the feed."""

    relevant: bool  # it touches a replicated table or a schema the filter selects
    joined: dict[int, TrackedTable]  # physical id -> table, to feed from the job's finished ts
    left: dict[int, TrackedTable]  # physical ids no longer replicated after the job
    touched: list[TrackedTable]  # the job's tables after it (as before it when it removed them)
    replicated: frozenset[int] = frozenset()  # logical ids of `touched` the filter selects
    copied: dict[int, TrackedTable] = field(default_factory=dict)  # replicated ids read at the finished ts


SchemaLoader = Callable[[int], SchemaSnapshot]
RunningTables = Callable[[int], frozenset[int]]  # ts -> ids of the tables of DDL jobs running at ts


def _none_running(ts: int) -> frozenset[int]:
    return frozenset()


class SchemaTracker:
    """Not thread-safe: the DDL puller applies jobs one at a time, in commit order."""

    def __init__(self, snapshot: SchemaSnapshot, table_filter: TableFilter, reload: SchemaLoader,
                 running: RunningTables = _none_running) -> None:
        self._filter = table_filter
        self._reload = reload
        self._running = running
        self._dbs: dict[int, DBInfo] = {}
        self._tables: dict[int, tuple[int, TableInfo]] = {}  # logical id -> (db id, info)
        self._held: set[int] = set()  # logical ids left out until add_tables names them
        self._load(snapshot)
        self._replicated = self._compute_replicated()

    @property
    def ts(self) -> int:
        return self._ts

    def replicated(self) -> dict[int, TrackedTable]:
        """Physical id -> table, for every table the filter selects that has rows in TiKV."""
        return dict(self._replicated)

    def lookup(self, physical_id: int) -> TrackedTable | None:
        return self._replicated.get(physical_id)

    def db(self, db_id: int) -> DBInfo | None:
        return self._dbs.get(db_id)

    def selected_dbs(self) -> list[DBInfo]:
        """Databases the filter can select tables from (TiCDC ShouldIgnoreSchema is false)."""
        return [d for d in self._dbs.values() if self._filter.should_replicate_schema(d.name)]

    def named(self, db: str, table: str) -> dict[int, TrackedTable]:
        """Physical id -> table for the named table now, whether the filter selects it or not."""
        key = table_key(db, table)
        return self._compute_replicated(lambda d, n: table_key(d, n) == key)

    def hold_back(self, logical_ids: set[int]) -> None:
        """Leave these tables out of the replicated set until add_tables names them: tables the
        filter selects that join through a request (tidelake.capture.changefeed.filter_change)."""
        self._held |= logical_ids
        self._replicated = self._compute_replicated()

    def add_tables(self, names: list[tuple[str, str]]) -> dict[int, TrackedTable]:
        """Also replicate these (db, table) names from now on (tables added to a running feed);
        returns the physical ids that join."""
        before = self._replicated
        keys = {table_key(db, table) for db, table in names}
        self._held = {tid for tid in self._held
                      if tid not in self._tables or self._tracked(tid).key not in keys}
        self._filter = _WithTables(self._filter, names)
        self._replicated = self._compute_replicated()
        return {pid: t for pid, t in self._replicated.items() if pid not in before}

    def restore(self, before: dict[int, tuple[int, TableInfo]]) -> None:
        """Take each table id as `before` has it (db id, info): the tables of DDL jobs still
        running at the snapshot's ts, whose meta TiDB had already changed step by step, back to the
        schema the finished jobs left (tidelake.capture.changefeed.running_jobs)."""
        self._tables.update(before)
        self._replicated = self._compute_replicated()

    def apply(self, job: DDLJob, finished_ts: int) -> JobEffect:
        """Move the schema past a finished job and say how the replicated set changed."""
        before = self._replicated
        touched_ids = self._touched_ids(job)
        touched_before = {tid: self._tracked(tid) for tid in touched_ids if tid in self._tables}
        schema_level = self._apply(job, finished_ts)
        self._ts = finished_ts
        after = self._replicated = self._compute_replicated()
        joined = {pid: t for pid, t in after.items() if pid not in before}
        left = {pid: t for pid, t in before.items() if pid not in after}
        replicated_logical = {t.logical_id for t in (*before.values(), *after.values())}
        # EXCHANGE PARTITION: the normal table now has the exchanged partition's id.
        touched_ids |= {pid for t in touched_before.values() for pid in t.info.physical_ids() if pid in self._tables}
        touched = [
            self._tracked(tid) if tid in self._tables else touched_before[tid]
            for tid in sorted(touched_ids)
            if tid in self._tables or tid in touched_before
        ]
        db = self._dbs.get(job.schema_id)
        db_name = db.name if db is not None else job.schema_name
        relevant = bool(joined or left or replicated_logical & touched_ids) or (
            schema_level and bool(db_name) and self._filter.should_replicate_schema(db_name)
        )
        if job.type == ActionType.EXCHANGE_TABLE_PARTITION:
            # An id joins only from a table the filter leaves out: no replica holds its rows.
            copied = dict(joined)
        else:
            copied = {pid: after[pid] for tid, t in touched_before.items()
                      if (info := self._became(job, tid)) is not None
                      for pid in copied_physical_ids(job.type, t.info, info) if pid in after}
        return JobEffect(relevant, joined, left, touched,
                         frozenset(t.logical_id for t in touched) & frozenset(replicated_logical), copied)

    # --- internals -----------------------------------------------------------------------

    def _became(self, job: DDLJob, table_id: int) -> TableInfo | None:
        """What table `table_id` is after `job`: itself, or the job's table when the job gave it a
        new id (PARTITION BY: job.table_id is the old table, table_info the new one)."""
        if table_id in self._tables:
            return self._tables[table_id][1]
        if job.table_id == table_id and job.table_info is not None and job.table_info.id in self._tables:
            return self._tables[job.table_info.id][1]
        return None

    def _load(self, snapshot: SchemaSnapshot) -> None:
        self._ts = snapshot.ts
        self._dbs = {d.id: d for d in snapshot.dbs if not is_system_schema(d.name)}
        self._tables = {
            t.id: (db_id, t) for db_id, tables in snapshot.tables.items() if db_id in self._dbs for t in tables
        }

    def _reload_at(self, ts: int, own: set[int]) -> None:
        """The schema at `ts`, except the tables of other jobs still running there: TiDB runs jobs
        on different tables at once and writes each step's meta, so the schema at `ts` shows their
        steps so far; the model keeps them as the finished jobs left them (what it feeds)."""
        kept = {tid: self._tables.get(tid) for tid in self._running(ts) - own}
        self._load(self._reload(ts))
        for tid, was in kept.items():
            if was is None:
                self._tables.pop(tid, None)
            else:
                self._tables[tid] = was

    def _touched_ids(self, job: DDLJob) -> set[int]:
        ids = {t.id for t in job.multiple_table_infos}
        if job.table_info is not None:
            ids.add(job.table_info.id)
        if job.table_id:
            ids.add(job.table_id)
        if job.type == ActionType.DROP_SCHEMA:
            ids |= {tid for tid, (db_id, _) in self._tables.items() if db_id == job.schema_id}
        return ids

    def _apply(self, job: DDLJob, finished_ts: int) -> bool:
        """Apply one job to the model; True for a schema-level job (no table of its own)."""
        action = job.type
        if not isinstance(action, ActionType) or action in _RELOAD_ACTIONS:
            self._reload_at(finished_ts, self._touched_ids(job))
            return False
        if action in _SCHEMA_ACTIONS:
            if job.db_info is not None:
                self._dbs[job.db_info.id] = job.db_info
            return True
        if action == ActionType.DROP_SCHEMA:
            self._dbs.pop(job.schema_id, None)
            self._tables = {tid: v for tid, v in self._tables.items() if v[0] != job.schema_id}
            return True
        if action in _DROP_ACTIONS:
            self._tables.pop(job.table_id, None)
            return False
        if action == ActionType.TRUNCATE_TABLE:
            self._tables.pop(job.table_id, None)  # the new table id arrives in table_info
        infos = job.multiple_table_infos or ([job.table_info] if job.table_info is not None else [])
        for info in infos:
            self._tables[info.id] = (job.schema_id, info)
        return not infos and job.table_id == 0

    def _compute_replicated(self, selects: Callable[[str, str], bool] | None = None) -> dict[int, TrackedTable]:
        held = self._held if selects is None else set()  # named() still finds a held table
        selects = selects or self._filter.should_replicate_table
        out: dict[int, TrackedTable] = {}
        for tid, (db_id, info) in self._tables.items():
            db = self._dbs.get(db_id)
            if db is None or tid in held or not has_rows(info) or not selects(db.name, info.name):
                continue
            tracked = TrackedTable(db_id, db.name, info.name, tid, info)
            for pid in info.physical_ids():
                if pid <= MAX_USER_GLOBAL_ID:  # docs/metadata.md#reserved-ids
                    out[pid] = tracked
        return out

    def _tracked(self, table_id: int) -> TrackedTable:
        db_id, info = self._tables[table_id]
        db = self._dbs.get(db_id)
        return TrackedTable(db_id, db.name if db is not None else "", info.name, table_id, info)


class _WithTables:
    """The changefeed's filter plus named tables; names compare case-insensitively as in TiDB."""

    def __init__(self, base: TableFilter | _WithTables, names: list[tuple[str, str]]) -> None:
        self._base = base
        self._names = {table_key(db, table) for db, table in names}
        self._dbs = {db for db, _ in self._names}

    def should_replicate_table(self, db: str, table: str) -> bool:
        return table_key(db, table) in self._names or self._base.should_replicate_table(db, table)

    def should_replicate_schema(self, db: str) -> bool:
        return db.lower() in self._dbs or self._base.should_replicate_schema(db)
