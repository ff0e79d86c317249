"""Per-table schema history built from the `ddl` table: which TableInfo is valid when, and where
the barriers are (docs/design.md#timestamps-and-watermarks). A table's identity is its id at its
CREATE, through RENAME and TRUNCATE; the info valid at ts is the last DDL's at or below ts, and
the barrier after checkpoint c is the next DDL's commit ts - 1. Read by merge, status, the plan.
Owner: the lander writes the `ddl` table it is built from (tidelake.lake.ddl_log).

More: docs/internals.md#schema_history.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import NewType

from cachetools import LRUCache
from deltalake import DeltaTable

from tidelake.codec.ddl_job import ActionType, copied_physical_ids
from tidelake.codec.schema import TableInfo
from tidelake.errors import InputError
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import DdlSource, LakeLayout

TableKey = NewType("TableKey", int)

_DROPS = frozenset({ActionType.DROP_TABLE, ActionType.DROP_VIEW, ActionType.DROP_SEQUENCE})
_CREATES = frozenset({ActionType.CREATE_TABLE, ActionType.CREATE_TABLES, ActionType.RECOVER_TABLE})
LOADED_MAX = 8  # histories kept by SchemaHistory.load, the least recently used dropped first


@dataclass(frozen=True)
class DdlEvent:
    """One DDL as it affects one replicated table."""

    job_id: int
    commit_ts: int
    action: int  # ActionType code (plain int for codes newer than tidelake)
    action_name: str
    table: TableKey
    db: str  # database name after the job
    name: str  # table name after the job
    query: str | None
    table_info_after: TableInfo | None  # None when the job removed the table
    table_info_before: TableInfo | None  # None when the job created it
    db_before: str | None = None
    name_before: str | None = None
    source: str = "job"
    schema_id: int = 0

    @property
    def creates_table(self) -> bool:
        return self.table_info_before is None and self.table_info_after is not None

    @property
    def drops_table(self) -> bool:
        return self.table_info_after is None

    @property
    def physical_ids_before(self) -> list[int]:
        return self.table_info_before.physical_ids() if self.table_info_before is not None else []

    @property
    def physical_ids_after(self) -> list[int]:
        return self.table_info_after.physical_ids() if self.table_info_after is not None else []

    @property
    def removed_physical_ids(self) -> list[int]:
        """Physical ids whose rows the job removed (dropped/truncated partitions, truncated table)."""
        after = set(self.physical_ids_after)
        return [pid for pid in self.physical_ids_before if pid not in after]

    @property
    def copied_physical_ids(self) -> list[int]:
        """Ids whose rows the puller landed as puts at this DDL's ts (tidelake.capture.changefeed.copied_rows)."""
        return copied_physical_ids(self.action, self.table_info_before, self.table_info_after)

    @property
    def barrier(self) -> int:
        """The checkpoint a table must reach before this DDL is applied (invariant 4)."""
        return self.commit_ts - 1


@dataclass
class _Timeline:
    key: TableKey
    schema_id: int
    logical_id: int  # current TiDB table id (changes on TRUNCATE)
    events: list[DdlEvent] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return not self.events[-1].drops_table

    @property
    def info(self) -> TableInfo | None:
        return self.events[-1].table_info_after

    def at(self, ts: int) -> DdlEvent | None:
        i = bisect.bisect_right([e.commit_ts for e in self.events], ts)
        return self.events[i - 1] if i else None


def _has_rows(info: TableInfo) -> bool:
    """Views, sequences and temporary tables have no rows to replicate."""
    raw = info.raw
    return raw.get("view") is None and raw.get("sequence") is None and not raw.get("temp_table_type")


def _action(code: int) -> ActionType | int:
    try:
        return ActionType(code)
    except ValueError:
        return code


# Folds by (ddl path, table id, version, jobs_until); a cachetools cache is not thread-safe, so
# every access holds _LOADED_LOCK (a merge follower's table threads load at once).
_LOADED: LRUCache[tuple[str, str, int, int | None], SchemaHistory] = LRUCache(maxsize=LOADED_MAX)
_LOADED_LOCK = threading.Lock()


class SchemaHistory:
    """Read-only view of the `ddl` table, folded per replicated table. Never changed after the
    fold, so one loaded history is shared by every caller and thread that loads the same version."""

    def __init__(self, rows: Iterable[DdlRow]) -> None:
        self._tables: dict[TableKey, _Timeline] = {}
        self._by_logical: dict[int, TableKey] = {}  # current logical id -> key (live tables)
        self._dbs: dict[int, str] = {}
        self._db_events: list[DdlRow] = []
        groups: dict[tuple[int, int, str], list[DdlRow]] = defaultdict(list)
        for row in rows:
            groups[(row.commit_ts, row.job_id, row.source)].append(row)
        for (_, _, source), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2] != DdlSource.SNAPSHOT, kv[0][1])):
            self._apply_job(sorted(group, key=lambda r: r.table_id), source)

    @classmethod
    def load(cls, layout: LakeLayout, version: int | None = None, jobs_until: int | None = None) -> SchemaHistory:
        """From the `ddl` table (at `version`, e.g. Watermarks.ddl_version, for a reproducible read).
        With `jobs_until`, DDL jobs finished after it are left out: a flush that landed them and
        failed before its watermarks leaves them above the durable DDL watermark, and the next run
        pulls them again (a restart's schema is as of that watermark)."""
        if not DeltaTable.is_deltatable(layout.ddl, storage_options=layout.storage_options):
            return cls([])
        table = DeltaTable(layout.ddl, version=version, storage_options=layout.storage_options)
        # A version of a table (its id: a folder made again is another table) always holds the same
        # rows, so its fold is kept: a merge follower loads it every pass, mostly unchanged.
        key = (layout.ddl, table.metadata().id, table.version(), jobs_until)
        with _LOADED_LOCK:
            loaded = _LOADED.get(key)  # a hit is made the most recently used
            if loaded is not None:
                return loaded
        rows = (DdlRow(**r) for r in read_delta(table).to_pylist())
        if jobs_until is not None:
            rows = (r for r in rows if r.source != DdlSource.JOB or r.commit_ts <= jobs_until)
        loaded = cls(rows)
        with _LOADED_LOCK:
            _LOADED[key] = loaded
        return loaded

    # --- queries -------------------------------------------------------------------------

    def tables(self) -> list[TableKey]:
        """Every table ever replicated, dropped ones included, in order of appearance."""
        return list(self._tables)

    def live_tables(self) -> list[TableKey]:
        return [k for k, t in self._tables.items() if t.live]

    def ddl_events(self, table: TableKey) -> list[DdlEvent]:
        return list(self._timeline(table).events)

    def table_info_at(self, table: TableKey, ts: int) -> TableInfo | None:
        """Schema of the table's changes at commit ts `ts`; None before it exists or after its drop."""
        event = self._timeline(table).at(ts)
        return None if event is None else event.table_info_after

    def physical_ids_at(self, table: TableKey, ts: int) -> list[int]:
        info = self.table_info_at(table, ts)
        return [] if info is None else info.physical_ids()

    def name_at(self, table: TableKey, ts: int) -> tuple[str, str] | None:
        """(db, table) names at `ts`, None outside the table's life."""
        event = self._timeline(table).at(ts)
        return None if event is None or event.drops_table else (event.db, event.name)

    def current_name(self, table: TableKey) -> tuple[str, str]:
        """Latest (db, table) names, for a dropped table the names it had when dropped."""
        last = self._timeline(table).events[-1]
        return last.db, last.name

    def next_ddl_after(self, table: TableKey, ts: int) -> DdlEvent | None:
        """The first DDL of the table with commit_ts > ts; its commit_ts - 1 is the barrier."""
        events = self._timeline(table).events
        i = bisect.bisect_right([e.commit_ts for e in events], ts)
        return events[i] if i < len(events) else None

    def all_physical_ids(self, table: TableKey) -> list[int]:
        """Every physical id the table ever had (for changelog retention and reads across truncates)."""
        seen: dict[int, None] = {}
        for event in self._timeline(table).events:
            for pid in (*event.physical_ids_before, *event.physical_ids_after):
                seen[pid] = None
        return list(seen)

    def table_of_physical_id(self, physical_id: int) -> TableKey | None:
        for key in self._tables:
            if physical_id in self.all_physical_ids(key):
                return key
        return None

    def job_tables(self, job_id: int, commit_ts: int) -> list[TableKey]:
        """The tables one job changed (both tables of an EXCHANGE PARTITION)."""
        return [k for k, t in self._tables.items() if any(e.job_id == job_id and e.commit_ts == commit_ts
                                                            for e in t.events)]

    def live_table(self, logical_id: int) -> tuple[int, TableInfo] | None:
        """(schema id, info) of the live table whose TiDB id is now `logical_id`, as its last DDL
        in the history left it; None for a table the history does not replicate."""
        key = self._by_logical.get(logical_id)
        timeline = self._tables.get(key) if key is not None else None
        if timeline is None or not timeline.live or timeline.info is None:
            return None
        return timeline.events[-1].schema_id or timeline.schema_id, timeline.info

    def find(self, db: str, name: str) -> TableKey | None:
        """The live table now called `db`.`name` (case-insensitive as TiDB), else the latest dropped one."""
        return self.find_many([(db, name)])[0]

    def find_many(self, names: Sequence[tuple[str, str]]) -> list[TableKey | None]:
        """find of each (db, table), the history's names read once for all of them (a merge run
        names each of up to thousands of tables)."""
        by_name: dict[tuple[str, str], list[TableKey]] = {}
        for key in self._tables:
            db, name = self.current_name(key)
            by_name.setdefault((db.lower(), name.lower()), []).append(key)
        found = []
        for db, name in names:
            matches = by_name.get((db.lower(), name.lower()), [])
            live = [k for k in matches if self._tables[k].live]
            found.append((live or matches or [None])[-1])
        return found

    def select(self, names: Sequence[str] | None) -> list[TableKey]:
        """Tables named 'db.table' (case-insensitive, as TiDB), or every table of the history."""
        if not names:
            return self.tables()
        parts = [name.partition(".") for name in names]
        keys = self.find_many([(db, table) for db, _, table in parts])
        for name, (_, dot, _), key in zip(names, parts, keys):
            if key is None or not dot:
                raise InputError(f"table {name!r} is not in the DDL history (give it as db.table)")
        return list(dict.fromkeys(keys))  # one name twice, or in two spellings, is still one table

    def db_events(self) -> list[DdlRow]:
        """Database-level jobs (create/drop/alter database) in commit order, for status and audit."""
        return list(self._db_events)

    def _timeline(self, table: TableKey) -> _Timeline:
        try:
            return self._tables[table]
        except KeyError:
            raise InputError(f"table {table} is not in the DDL history") from None

    # --- folding -------------------------------------------------------------------------

    def _apply_job(self, rows: list[DdlRow], source: str) -> None:
        rows = [r for r in rows if r.action != ActionType.NONE]  # a snapshot's start row names no schema
        if not rows:
            return
        action = _action(rows[0].action)
        for row in rows:
            if row.table_id == 0 and row.db_info is not None and row.schema_name:
                self._dbs[row.schema_id] = row.schema_name
        if action == ActionType.TRUNCATE_TABLE:
            self._truncate(rows)
            return
        if action == ActionType.RENAME_TABLES:  # rows landed before the puller kept one per table
            rows = list({r.table_id: r for r in rows}.values())  # the last: as the job left it
        for row in rows:
            if row.table_id:
                self._table_row(row, action, source)
        if all(r.table_id == 0 for r in rows):
            self._db_events.extend(rows)
            if action == ActionType.DROP_SCHEMA:
                self._drop_schema(rows[0])

    def _event(self, row: DdlRow, timeline: _Timeline | None, key: TableKey, after: TableInfo | None) -> DdlEvent:
        before = timeline.events[-1] if timeline is not None else None
        db = row.schema_name or self._dbs.get(row.schema_id) or (before.db if before else "")
        name = after.name if after is not None else (row.table_name or (before.name if before else ""))
        return DdlEvent(
            job_id=row.job_id,
            commit_ts=row.commit_ts,
            action=row.action,
            action_name=row.action_name,
            table=key,
            db=db,
            name=name,
            query=row.query,
            table_info_after=after,
            table_info_before=before.table_info_after if before is not None else None,
            db_before=before.db if before is not None else None,
            name_before=before.name if before is not None else None,
            source=row.source,
            schema_id=row.schema_id,
        )

    def _table_row(self, row: DdlRow, action: ActionType | int, source: str) -> None:
        info = TableInfo.from_json(row.table_info) if row.table_info is not None else None
        key = self._by_logical.get(row.table_id)
        timeline = self._tables.get(key) if key is not None else None
        if timeline is None:
            revived = self._tables.get(TableKey(row.table_id))
            if action == ActionType.RECOVER_TABLE and revived is not None and info is not None:
                self._append(revived, self._event(row, revived, revived.key, info))
                self._by_logical[row.table_id] = revived.key
                return
            if info is None or not _has_rows(info) or action in _DROPS or action == ActionType.DROP_SCHEMA:
                return  # a table we never replicated leaving, or a view/sequence
            # First sight: a CREATE, the start snapshot, or a job that brought the table into the
            # feed (e.g. RENAME into a filtered schema); either way the table starts here.
            key = TableKey(row.table_id)
            timeline = _Timeline(key, row.schema_id, row.table_id)
            self._tables[key] = timeline
            self._by_logical[row.table_id] = key
            self._append(timeline, self._event(row, None, key, info))
            return
        if source == DdlSource.SNAPSHOT:
            return  # a later start snapshot restates what the jobs already said
        if action in _DROPS or action == ActionType.DROP_SCHEMA:
            self._drop(timeline, row)
            return
        self._append(timeline, self._event(row, timeline, timeline.key, info or timeline.info))
        timeline.schema_id = row.schema_id or timeline.schema_id
        if info is not None and info.id != timeline.logical_id:  # EXCHANGE PARTITION's normal table
            self._by_logical.pop(timeline.logical_id, None)
            timeline.logical_id = info.id
            self._by_logical[info.id] = timeline.key

    def _truncate(self, rows: list[DdlRow]) -> None:
        """The old id is the one we know; the new TableInfo is the one whose id we do not (the
        puller may write one row per id, or one row under the old id carrying the new info)."""
        infos = [TableInfo.from_json(r.table_info) for r in rows if r.table_info is not None]
        new = [(r, i) for r, i in zip([r for r in rows if r.table_info is not None], infos) if i.id not in self._by_logical]
        old = [r.table_id for r in rows if r.table_id in self._by_logical]
        if not new:
            raise InputError(f"TRUNCATE TABLE job {rows[0].job_id} carries no TableInfo with the new table id")
        row, info = new[0]
        if not old:  # the table was not replicated before; it starts with its new id
            self._table_row(replace(row, table_id=info.id), ActionType.CREATE_TABLE, row.source)
            return
        timeline = self._tables[self._by_logical.pop(old[0])]
        self._append(timeline, self._event(row, timeline, timeline.key, info))
        timeline.logical_id = info.id
        self._by_logical[info.id] = timeline.key

    def _drop(self, timeline: _Timeline, row: DdlRow) -> None:
        self._append(timeline, self._event(row, timeline, timeline.key, None))
        self._by_logical.pop(timeline.logical_id, None)

    def _drop_schema(self, row: DdlRow) -> None:
        """DROP DATABASE: every live table of it goes (when the puller wrote no per-table rows)."""
        for timeline in list(self._tables.values()):
            if timeline.live and timeline.schema_id == row.schema_id:
                self._drop(timeline, row)
        self._dbs.pop(row.schema_id, None)

    def _append(self, timeline: _Timeline, event: DdlEvent) -> None:
        if timeline.events and event.commit_ts < timeline.events[-1].commit_ts:
            raise InputError(f"DDL job {event.job_id} at {event.commit_ts} is older than the table's last DDL")
        timeline.events.append(event)
