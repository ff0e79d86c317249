"""DDL jobs shaped as TiDB finishes them, turned into `ddl` rows by the puller's own code path.

`Upstream` keeps a schema like TiDB's meta and returns a done DDLJob per statement (binlog
TableInfo after the job, TRUNCATE with a new table id, partitions with their own ids, RENAME
COLUMN as action 12 — docs/wire.md#ddl-job-storage-as-ticdc-reads-it). `DdlFeed` runs every job through the puller's
SchemaTracker and `job_rows`, so the rows are exactly what the lander stores.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from tidelake.capture.changefeed.ddl_puller import job_rows
from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.schema import (
    DBInfo,
    IndexColumn,
    IndexInfo,
    PartitionDefinition,
    PartitionInfo,
    TableInfo,
)
from tidelake.lake.ddl_log import DdlRow, snapshot_rows
from tidelake.sim.tidb.types import build_column, column_def, parse_field_type
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import SchemaSnapshot
from tidelake.upstream.schema_tracker import SchemaTracker

TS_STEP = 1 << 18  # one millisecond of TSO


@dataclass
class Upstream:
    ts: int = 1000 << 18
    schema_version: int = 10
    next_id: int = 100
    dbs: dict[int, DBInfo] = field(default_factory=dict)
    tables: dict[int, tuple[int, TableInfo]] = field(default_factory=dict)  # table id -> (db id, info)
    step: int = TS_STEP  # ts between jobs; 1 makes each DDL's barrier the previous DDL's commit ts

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def tick(self) -> int:
        self.ts += self.step
        return self.ts

    def snapshot(self) -> SchemaSnapshot:
        tables: dict[int, list[TableInfo]] = {}
        for db_id, info in self.tables.values():
            tables.setdefault(db_id, []).append(copy.deepcopy(info))
        return SchemaSnapshot(self.ts, self.schema_version, list(self.dbs.values()), tables)

    def db_id(self, db: str) -> int:
        return next(i for i, d in self.dbs.items() if d.name == db)

    def table(self, db: str, name: str) -> TableInfo:
        db_id = self.db_id(db)
        return next(t for d, t in self.tables.values() if d == db_id and t.name == name)

    def _job(self, action: ActionType, db_id: int, table_id: int, query: str, info: TableInfo | None,
             db_info: DBInfo | None = None) -> DDLJob:
        self.schema_version += 1
        ts = self.tick()
        db = self.dbs.get(db_id)
        return DDLJob(
            id=self._id(), type=action, schema_id=db_id, table_id=table_id,
            schema_name=db.name if db else "", table_name=info.name if info else "",
            state=JobState.DONE, query=query, start_ts=ts - 10, schema_version=self.schema_version,
            db_info=copy.deepcopy(db_info), table_info=copy.deepcopy(info), finished_ts=ts,
        )

    # --- statements ----------------------------------------------------------------------

    def create_schema(self, name: str) -> DDLJob:
        db = DBInfo(self._id(), name)
        self.dbs[db.id] = db
        return self._job(ActionType.CREATE_SCHEMA, db.id, 0, f"CREATE DATABASE {name}", None, db)

    def drop_schema(self, name: str) -> DDLJob:
        db_id = self.db_id(name)
        db = self.dbs.pop(db_id)
        self.tables = {k: v for k, v in self.tables.items() if v[0] != db_id}
        return self._job(ActionType.DROP_SCHEMA, db_id, 0, f"DROP DATABASE {name}", None, db)

    def create_table(self, db: str, name: str, columns: list[tuple], partitions: list[str] | None = None) -> DDLJob:
        db_id = self.db_id(db)
        cols = [build_column(column_def(c), i + 1, i) for i, c in enumerate(columns)]
        info = TableInfo(self._id(), name, columns=cols, max_col_id=len(cols))
        has_pk = any(column_def(c).primary_key for c in columns)
        info.pk_is_handle = has_pk and cols[0].field_type.tp in mt.INTEGER_TYPES
        if has_pk and not info.pk_is_handle:  # a clustered common handle on the first column
            info.is_common_handle = True
            info.indices = [IndexInfo(self._id(), "PRIMARY", [IndexColumn(cols[0].name, 0)], unique=True, primary=True)]
        if partitions:
            info.partition = PartitionInfo(type=2, expr="id", enable=True,
                                           definitions=[PartitionDefinition(self._id(), p) for p in partitions])
        self.tables[info.id] = (db_id, info)
        return self._job(ActionType.CREATE_TABLE, db_id, info.id, f"CREATE TABLE {db}.{name} (...)", info)

    def _alter(self, db: str, name: str, action: ActionType, query: str, change) -> DDLJob:
        info = copy.deepcopy(self.table(db, name))
        change(info)
        db_id = self.db_id(db)
        self.tables[info.id] = (db_id, info)
        return self._job(action, db_id, info.id, query, info)

    def add_column(self, db: str, name: str, spec: tuple) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.max_col_id += 1
            col = build_column(column_def(spec), info.max_col_id, len(info.columns))
            col.origin_default = col.default
            info.columns.append(col)

        return self._alter(db, name, ActionType.ADD_COLUMN, f"ALTER TABLE {name} ADD COLUMN {spec[0]}", change)

    def drop_column(self, db: str, name: str, column: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.columns = [c for c in info.columns if c.name != column]
            for i, c in enumerate(info.columns):
                c.offset = i

        return self._alter(db, name, ActionType.DROP_COLUMN, f"ALTER TABLE {name} DROP COLUMN {column}", change)

    def rename_column(self, db: str, name: str, old: str, new: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.column_by_name(old).name = new

        return self._alter(db, name, ActionType.MODIFY_COLUMN, f"ALTER TABLE {name} RENAME COLUMN {old} TO {new}",
                           change)

    def modify_column(self, db: str, name: str, column: str, type_spec: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            col = info.column_by_name(column)
            flag = col.field_type.flag
            col.field_type = parse_field_type(type_spec)
            col.field_type.flag |= flag

        return self._alter(db, name, ActionType.MODIFY_COLUMN, f"ALTER TABLE {name} MODIFY {column} {type_spec}",
                           change)

    def multi_change(self, db: str, name: str, add: tuple, drop: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.columns = [c for c in info.columns if c.name != drop]
            info.max_col_id += 1
            col = build_column(column_def(add), info.max_col_id, len(info.columns))
            col.origin_default = col.default
            info.columns.append(col)
            for i, c in enumerate(info.columns):
                c.offset = i

        return self._alter(db, name, ActionType.MULTI_SCHEMA_CHANGE,
                           f"ALTER TABLE {name} ADD COLUMN {add[0]}, DROP COLUMN {drop}", change)

    def add_columns(self, db: str, name: str, specs: list[tuple]) -> DDLJob:
        """ALTER TABLE ... ADD COLUMN a ..., ADD COLUMN b ...: one multi-schema change job."""
        def change(info: TableInfo) -> None:
            for spec in specs:
                info.max_col_id += 1
                col = build_column(column_def(spec), info.max_col_id, len(info.columns))
                col.origin_default = col.default
                info.columns.append(col)

        added = ", ".join(f"ADD COLUMN {spec[0]}" for spec in specs)
        return self._alter(db, name, ActionType.MULTI_SCHEMA_CHANGE, f"ALTER TABLE {name} {added}", change)

    def add_index(self, db: str, name: str) -> DDLJob:
        return self._alter(db, name, ActionType.ADD_INDEX, f"ALTER TABLE {name} ADD INDEX i1 (...)",
                           lambda info: None)

    def set_comment(self, db: str, name: str, comment: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.comment = comment

        return self._alter(db, name, ActionType.MODIFY_TABLE_COMMENT, f"ALTER TABLE {name} COMMENT '{comment}'",
                           change)

    def truncate_table(self, db: str, name: str) -> DDLJob:
        db_id = self.db_id(db)
        old = self.table(db, name)
        info = copy.deepcopy(old)
        info.id = self._id()
        if info.partition is not None:
            for d in info.partition.definitions:
                d.id = self._id()
        del self.tables[old.id]
        self.tables[info.id] = (db_id, info)
        return self._job(ActionType.TRUNCATE_TABLE, db_id, old.id, f"TRUNCATE TABLE {name}", info)

    def rename_table(self, db: str, name: str, new_db: str, new_name: str) -> DDLJob:
        info = copy.deepcopy(self.table(db, name))
        info.name = new_name
        new_db_id = self.db_id(new_db)
        self.tables[info.id] = (new_db_id, info)
        return self._job(ActionType.RENAME_TABLE, new_db_id, info.id, f"RENAME TABLE {db}.{name} TO {new_db}.{new_name}",
                         info)

    def rename_tables(self, db: str, pairs: list[tuple[str, str]]) -> DDLJob:
        """RENAME TABLE a TO b, c TO d... in one job: MultipleTableInfos holds each pair's table as
        that pair left it, as pkg/ddl `onRenameTables` appends them (a swapped table twice)."""
        db_id = self.db_id(db)
        infos = []
        for old, new in pairs:
            info = copy.deepcopy(self.table(db, old))
            info.name = new
            self.tables[info.id] = (db_id, info)
            infos.append(copy.deepcopy(info))
        query = "RENAME TABLE " + ", ".join(f"{old} TO {new}" for old, new in pairs)
        job = self._job(ActionType.RENAME_TABLES, db_id, infos[-1].id, query, infos[-1])
        job.multiple_table_infos = infos
        return job

    def exchange_partition(self, db: str, pt_name: str, part: str, nt_name: str) -> DDLJob:
        """EXCHANGE PARTITION: p's id and nt's id swap; the job is nt's, its binlog info pt's after
        (pkg/ddl executor.go ExchangeTablePartition)."""
        db_id = self.db_id(db)
        pt, nt = copy.deepcopy(self.table(db, pt_name)), copy.deepcopy(self.table(db, nt_name))
        defn = next(d for d in pt.partition.definitions if d.name == part)
        old_nt = nt.id
        del self.tables[old_nt]
        nt.id, defn.id = defn.id, old_nt
        self.tables[pt.id] = (db_id, pt)
        self.tables[nt.id] = (db_id, nt)
        job = self._job(ActionType.EXCHANGE_TABLE_PARTITION, db_id, old_nt,
                        f"ALTER TABLE {pt_name} EXCHANGE PARTITION {part} WITH TABLE {nt_name}", pt)
        job.raw_args = [nt.id, db_id, pt.id, part, True]
        return job

    def drop_table(self, db: str, name: str) -> DDLJob:
        db_id = self.db_id(db)
        info = self.table(db, name)
        del self.tables[info.id]
        return self._job(ActionType.DROP_TABLE, db_id, info.id, f"DROP TABLE {name}", info)

    def add_partition(self, db: str, name: str, part: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.partition.definitions.append(PartitionDefinition(self._id(), part))

        return self._alter(db, name, ActionType.ADD_TABLE_PARTITION, f"ALTER TABLE {name} ADD PARTITION ({part})",
                           change)

    def drop_partition(self, db: str, name: str, part: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            info.partition.definitions = [d for d in info.partition.definitions if d.name != part]

        return self._alter(db, name, ActionType.DROP_TABLE_PARTITION, f"ALTER TABLE {name} DROP PARTITION {part}",
                           change)

    def truncate_partition(self, db: str, name: str, part: str) -> DDLJob:
        def change(info: TableInfo) -> None:
            for d in info.partition.definitions:
                if d.name == part:
                    d.id = self._id()

        return self._alter(db, name, ActionType.TRUNCATE_TABLE_PARTITION,
                           f"ALTER TABLE {name} TRUNCATE PARTITION {part}", change)


class DdlFeed:
    """The puller's view: a start snapshot, then each job through SchemaTracker -> job_rows."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.tracker = SchemaTracker(upstream.snapshot(), TableFilter.parse([]), lambda ts: upstream.snapshot())
        self.rows: list[DdlRow] = snapshot_rows(self.tracker, upstream.schema_version)

    def run(self, job: DDLJob) -> DDLJob:
        effect = self.tracker.apply(job, job.finished_ts)
        if effect.relevant:
            self.rows += job_rows(job, job.finished_ts, effect)
        return job
