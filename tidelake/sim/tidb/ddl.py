"""DDL as TiDB's DDL owner runs it: a queued job, one transaction per schema-state step, a finish.

Each job is: (1) allocate ids from `NextGlobalID` and insert the job row (state queueing);
(2) per online-schema-change step, one transaction that writes the meta keys, a new schema
version with its `Diff:<ver>` and the job row (state running, then done with `binlog` filled on
the last step, FinishedTS left 0); (3) delete the job row and insert it into tidb_ddl_history.
Steps follow TiDB's state machines (e.g. ADD COLUMN none -> delete-only -> write-only ->
write-reorg -> public), so readers meet intermediate states and running jobs as on a real cluster.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState, SchemaState
from tidelake.codec.schema import (
    DBInfo,
    IndexColumn,
    IndexInfo,
    PartitionInfo,
    TableInfo,
)
from tidelake.errors import InputError
from tidelake.sim.tidb import ddl_job_row as jr
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.kvtxn import KvTxn
from tidelake.sim.tidb.types import (
    ColumnDef,
    build_column,
    column_def,
    parse_field_type,
)

S = SchemaState


@dataclass
class Step:
    """One schema-state transition: its meta writes run inside the step's transaction."""

    schema_state: int
    apply: Callable[[KvTxn], None]


@dataclass
class JobPlan:
    """Everything a job needs besides its steps: identity, texts for the job row, binlog after."""

    job: DDLJob
    steps: list[Step]
    binlog: Callable[[], tuple[DBInfo | None, TableInfo | None]]
    schema_ids: str = ""
    table_ids: str = ""
    new_table_id: int = 0
    old_schema_id: int = 0
    split_ids: Sequence[int] = ()


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _int_rank(tp: int) -> int:
    return [mt.TYPE_TINY, mt.TYPE_SHORT, mt.TYPE_INT24, mt.TYPE_LONG, mt.TYPE_LONGLONG].index(tp)


def metadata_only_change(old: Any, new: Any) -> bool:
    """TiDB `needChangeColumnData` is false: same family, no narrowing, same signedness/charset."""
    if old.tp in mt.INTEGER_TYPES and new.tp in mt.INTEGER_TYPES:
        return (old.flag & mt.UNSIGNED_FLAG) == (new.flag & mt.UNSIGNED_FLAG) and _int_rank(new.tp) >= _int_rank(old.tp)
    if old.tp == new.tp and old.tp in (mt.TYPE_VARCHAR, mt.TYPE_VAR_STRING):
        return new.flen >= old.flen and (old.charset, old.collate) == (new.charset, new.collate)
    return old.tp == new.tp and (old.flen, old.decimal, old.elems) == (new.flen, new.decimal, new.elems)


class DDLExecutor:
    """The DDL owner of one simulated TiDB: jobs run one at a time, like TiDB's DDL owner."""

    def __init__(self, cluster: Any, catalog: Catalog, schema_lock: threading.RLock) -> None:
        self._cluster = cluster
        self._catalog = catalog
        self._schema_lock = schema_lock
        self._ddl_lock = threading.Lock()

    # ---- databases -------------------------------------------------------------------------

    def create_database(self, name: str) -> DDLJob:
        with self._ddl_lock:
            if name.lower() in self._catalog.dbs:
                raise InputError(f"database {name!r} already exists")
            job_id, db_id = self._catalog.alloc_ids(2)
            db = DBInfo(id=db_id, name=name)
            job = self._job(job_id, ActionType.CREATE_SCHEMA, db, None, f"CREATE DATABASE {q(name)}")
            job.raw_args = [db.to_json()]

            def create(txn: KvTxn) -> None:
                self._catalog.put_db(txn, db)

            return self._run(JobPlan(job, [Step(S.PUBLIC, create)], lambda: (db, None)))

    def drop_database(self, name: str) -> DDLJob:
        with self._ddl_lock:
            db = self._catalog.db(name)
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_SCHEMA, db, None, f"DROP DATABASE {q(name)}")
            states = {"db": db}

            def set_state(state: int) -> Callable[[KvTxn], None]:
                def apply(txn: KvTxn) -> None:
                    states["db"] = replace(copy.deepcopy(states["db"]), state=state)
                    if state == S.NONE:
                        self._catalog.drop_db(txn, states["db"])
                    else:
                        self._catalog.put_db(txn, states["db"])
                return apply

            steps = [Step(s, set_state(s)) for s in (S.WRITE_ONLY, S.DELETE_ONLY, S.NONE)]
            return self._run(JobPlan(job, steps, lambda: (states["db"], None)))

    # ---- tables ----------------------------------------------------------------------------

    def create_table(self, db: str, name: str, columns: Sequence[ColumnDef | tuple], *,
                     primary_key: Sequence[str] | None = None, clustered: bool | None = None,
                     indexes: Sequence[tuple[str, Sequence[str], bool]] = (),
                     partition: dict | None = None) -> DDLJob:
        """CREATE TABLE. Clustering follows TiDB's default `INT_ONLY`: a single integer PK is the row
        handle; other PKs are non-clustered (`_tidb_rowid`) unless `clustered=True` (common handle)."""
        with self._ddl_lock:
            db_info = self._catalog.db(db)
            if self._catalog.has_table(db, name):
                raise InputError(f"table {db}.{name} already exists")
            defs = [column_def(c) for c in columns]
            if not defs:
                raise InputError(f"table {db}.{name}: needs at least one column")
            n_parts = part.count_of(partition) if partition else 0
            job_id, table_id, *part_ids = self._catalog.alloc_ids(2 + n_parts)
            info = build_table(table_id, name, defs, primary_key, clustered, indexes)
            if partition:
                info.partition = part.build_partition(partition, part_ids)
                check_partition_column(info)
            job = self._job(job_id, ActionType.CREATE_TABLE, db_info, info, create_table_sql(name, info))

            def create(txn: KvTxn) -> None:
                info.update_timestamp = txn.start_ts
                self._catalog.put_table(txn, db_info.id, info)

            job.raw_args = [info.to_json(), False]
            plan = JobPlan(job, [Step(S.PUBLIC, create)], lambda: (None, info), split_ids=info.physical_ids())
            return self._run(plan)

    def drop_table(self, db: str, name: str) -> DDLJob:
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, name)
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_TABLE, db_info, info, f"DROP TABLE {q(name)}")
            current = {"t": info}

            def set_state(state: int) -> Callable[[KvTxn], None]:
                def apply(txn: KvTxn) -> None:
                    current["t"] = self._updated(current["t"], txn, state=state)
                    if state == S.NONE:
                        self._catalog.drop_table(txn, db_info.id, current["t"])
                    else:
                        self._catalog.put_table(txn, db_info.id, current["t"])
                return apply

            steps = [Step(s, set_state(s)) for s in (S.WRITE_ONLY, S.DELETE_ONLY, S.NONE)]
            return self._run(JobPlan(job, steps, lambda: (None, current["t"])))

    def truncate_table(self, db: str, name: str) -> DDLJob:
        """New physical ids for the table and its partitions; the old rows stay behind the old ids."""
        with self._ddl_lock:
            db_info, old = self._catalog.db(db), self._catalog.table(db, name)
            n_parts = len(old.partition.definitions) if old.partition else 0
            job_id, new_id, *part_ids = self._catalog.alloc_ids(2 + n_parts)
            new = copy.deepcopy(old)
            new.id = new_id
            if new.partition:
                for defn, pid in zip(new.partition.definitions, part_ids):
                    defn.id = pid
                    defn.raw = {**defn.raw, "id": pid}
            job = self._job(job_id, ActionType.TRUNCATE_TABLE, db_info, old, f"TRUNCATE TABLE {q(name)}")
            job.raw_args = [new_id, False, part_ids]

            def truncate(txn: KvTxn) -> None:
                new.update_timestamp = txn.start_ts
                self._catalog.drop_table(txn, db_info.id, old)
                self._catalog.put_table(txn, db_info.id, new)

            plan = JobPlan(job, [Step(S.PUBLIC, truncate)], lambda: (None, new), new_table_id=new_id,
                           table_ids=jr.table_ids_text(job, new_id), split_ids=new.physical_ids())
            return self._run(plan)

    def rename_table(self, db: str, name: str, new_name: str, new_db: str | None = None) -> DDLJob:
        with self._ddl_lock:
            old_db, info = self._catalog.db(db), self._catalog.table(db, name)
            target_db = self._catalog.db(new_db or db)
            if self._catalog.has_table(target_db.name, new_name):
                raise InputError(f"table {target_db.name}.{new_name} already exists")
            (job_id,) = self._catalog.alloc_ids(1)
            query = f"RENAME TABLE {q(old_db.name)}.{q(name)} TO {q(target_db.name)}.{q(new_name)}"
            job = self._job(job_id, ActionType.RENAME_TABLE, target_db, info, query)
            job.raw_args = [old_db.id, {"O": new_name, "L": new_name.lower()}, {"O": old_db.name, "L": old_db.name.lower()}]
            renamed = {"t": info}

            def rename(txn: KvTxn) -> None:
                renamed["t"] = self._updated(info, txn, name=new_name)
                if target_db.id == old_db.id:
                    self._catalog.put_table(txn, old_db.id, renamed["t"], old_name=name)
                else:
                    base = self._catalog.rowid_bases.get(info.id)
                    self._catalog.drop_table(txn, old_db.id, info)
                    self._catalog.put_table(txn, target_db.id, renamed["t"])
                    if base is not None:
                        self._catalog.write_rowid_base(txn, target_db.id, info.id, base)

            plan = JobPlan(job, [Step(S.PUBLIC, rename)], lambda: (None, renamed["t"]), old_schema_id=old_db.id,
                           schema_ids=jr.schema_ids_text(job, old_db.id))
            return self._run(plan)

    # ---- columns ---------------------------------------------------------------------------

    def add_column(self, db: str, table: str, column: ColumnDef | tuple) -> DDLJob:
        """Rows written before keep their encoding; readers fill `origin_default` (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)."""
        defn = column_def(column)
        if defn.primary_key or defn.auto_increment:
            raise InputError(f"add column {defn.name!r}: PRIMARY KEY / AUTO_INCREMENT columns cannot be added")
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            if info.column_by_name(defn.name) is not None:
                raise InputError(f"table {db}.{table} already has column {defn.name!r}")
            (job_id,) = self._catalog.alloc_ids(1)
            col = build_column(defn, info.max_col_id + 1, len(info.columns))
            if col.default is None and col.default_bit is None and mt.is_not_null(col.field_type.flag):
                raise InputError(f"add column {defn.name!r}: NOT NULL needs a DEFAULT for existing rows")
            col.origin_default, col.origin_default_bit = col.default, col.default_bit
            query = f"ALTER TABLE {q(table)} ADD COLUMN {column_sql(col)}"
            job = self._job(job_id, ActionType.ADD_COLUMN, db_info, info, query)
            job.raw_args = [col.to_json(), {"Tp": 0, "RelativeColumn": None}, len(info.columns), False]

            def with_column(t: TableInfo, state: int) -> TableInfo:
                cols = [c for c in t.columns if c.id != col.id] + [replace(copy.deepcopy(col), state=state)]
                return replace(t, columns=cols, max_col_id=max(t.max_col_id, col.id))

            states = (S.DELETE_ONLY, S.WRITE_ONLY, S.WRITE_REORGANIZATION, S.PUBLIC)
            return self._run_table_steps(job, db_info, info, [(s, lambda t, s=s: with_column(t, s)) for s in states])

    def drop_column(self, db: str, table: str, name: str) -> DDLJob:
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            col = self._column(info, name)
            if col.field_type.flag & mt.PRI_KEY_FLAG or any(ic.name.lower() == name.lower()
                                                             for idx in info.indices for ic in idx.columns):
                raise InputError(f"drop column {name!r}: it is part of a key; drop the index first")
            if info.partition and part.partition_column(info).lower() == name.lower():
                raise InputError(f"drop column {name!r}: it is the partitioning column")
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_COLUMN, db_info, info, f"ALTER TABLE {q(table)} DROP COLUMN {q(name)}")
            job.raw_args = [{"O": col.name, "L": col.name.lower()}, False]

            def with_state(t: TableInfo, state: int) -> TableInfo:
                if state == S.NONE:
                    return _renumber(replace(t, columns=[c for c in t.columns if c.id != col.id]))
                return replace(t, columns=[replace(c, state=state) if c.id == col.id else c for c in t.columns])

            states = (S.WRITE_ONLY, S.DELETE_ONLY, S.DELETE_REORGANIZATION, S.NONE)
            return self._run_table_steps(job, db_info, info, [(s, lambda t, s=s: with_state(t, s)) for s in states])

    def rename_column(self, db: str, table: str, name: str, new_name: str) -> DDLJob:
        """RENAME COLUMN is ActionModifyColumn (12) in TiDB; no separate code (docs/wire.md#actiontype-codes)."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            col = self._column(info, name)
            if info.column_by_name(new_name) is not None:
                raise InputError(f"table {db}.{table} already has column {new_name!r}")
            (job_id,) = self._catalog.alloc_ids(1)
            query = f"ALTER TABLE {q(table)} RENAME COLUMN {q(name)} TO {q(new_name)}"
            job = self._job(job_id, ActionType.MODIFY_COLUMN, db_info, info, query)
            renamed = replace(copy.deepcopy(col), name=new_name)
            job.raw_args = [renamed.to_json(), {"O": col.name, "L": col.name.lower()}, {"Tp": 0, "RelativeColumn": None}, 0, 0]

            def rename(t: TableInfo) -> TableInfo:
                cols = [renamed if c.id == col.id else c for c in t.columns]
                indices = [replace(idx, columns=[replace(ic, name=new_name) if ic.name.lower() == name.lower() else ic
                                                 for ic in idx.columns]) for idx in t.indices]
                partition = t.partition
                if partition and part.partition_column(t).lower() == name.lower():
                    partition = replace(copy.deepcopy(partition), expr=q(new_name))
                return replace(t, columns=cols, indices=indices, partition=partition)

            return self._run_table_steps(job, db_info, info, [(S.PUBLIC, rename)])

    def modify_column(self, db: str, table: str, name: str, new_type: str, nullable: bool | None = None) -> DDLJob:
        """MODIFY COLUMN without a row rewrite: integer widening, VARCHAR lengthening, NULL-ability
        relaxed. TiDB rewrites every row (reorg, new column id) for other changes; those are refused."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            col = self._column(info, name)
            new_ft = parse_field_type(new_type)
            keep = mt.PRI_KEY_FLAG | mt.UNIQUE_KEY_FLAG | mt.MULTIPLE_KEY_FLAG | mt.AUTO_INCREMENT_FLAG | mt.NO_DEFAULT_VALUE_FLAG
            new_ft.flag |= col.field_type.flag & keep
            not_null = mt.is_not_null(col.field_type.flag) if nullable is None else not nullable
            if not_null and not mt.is_not_null(col.field_type.flag):
                raise InputError(f"modify column {name!r}: NULL -> NOT NULL needs a data check; not simulated")
            if not_null:
                new_ft.flag |= mt.NOT_NULL_FLAG
            if not metadata_only_change(col.field_type, new_ft):
                raise InputError(f"modify column {name!r} to {new_type!r}: TiDB would rewrite every row (reorg); "
                                 "only integer widening and VARCHAR lengthening are simulated")
            (job_id,) = self._catalog.alloc_ids(1)
            modified = replace(copy.deepcopy(col), field_type=new_ft)
            query = f"ALTER TABLE {q(table)} MODIFY COLUMN {column_sql(modified)}"
            job = self._job(job_id, ActionType.MODIFY_COLUMN, db_info, info, query)
            job.raw_args = [modified.to_json(), {"O": col.name, "L": col.name.lower()}, {"Tp": 0, "RelativeColumn": None}, 0, 0]

            def modify(t: TableInfo) -> TableInfo:
                return replace(t, columns=[modified if c.id == col.id else c for c in t.columns])

            return self._run_table_steps(job, db_info, info, [(S.PUBLIC, modify)])

    # ---- indexes ---------------------------------------------------------------------------

    def add_index(self, db: str, table: str, name: str, columns: Sequence[str], unique: bool = False) -> DDLJob:
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            if any(idx.name.lower() == name.lower() for idx in info.indices):
                raise InputError(f"table {db}.{table} already has index {name!r}")
            idx_cols = [IndexColumn(self._column(info, c).name, self._column(info, c).offset) for c in columns]
            (job_id,) = self._catalog.alloc_ids(1)
            kind = "UNIQUE INDEX" if unique else "INDEX"
            query = f"ALTER TABLE {q(table)} ADD {kind} {q(name)}({', '.join(q(c) for c in columns)})"
            job = self._job(job_id, ActionType.ADD_INDEX, db_info, info, query)
            index = IndexInfo(id=info.max_idx_id + 1, name=name, columns=idx_cols, unique=unique)
            job.raw_args = [unique, {"O": name, "L": name.lower()},
                            [{"Column": {"Name": {"O": c, "L": c.lower()}}, "Length": -1} for c in columns], None, [], False]

            def with_index(t: TableInfo, state: int) -> TableInfo:
                indices = [i for i in t.indices if i.id != index.id] + [replace(copy.deepcopy(index), state=state)]
                return replace(t, indices=indices, max_idx_id=max(t.max_idx_id, index.id))

            states = (S.DELETE_ONLY, S.WRITE_ONLY, S.WRITE_REORGANIZATION, S.PUBLIC)
            return self._run_table_steps(job, db_info, info, [(s, lambda t, s=s: with_index(t, s)) for s in states])

    def drop_index(self, db: str, table: str, name: str) -> DDLJob:
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            index = next((i for i in info.indices if i.name.lower() == name.lower()), None)
            if index is None or index.primary:
                raise InputError(f"table {db}.{table} has no droppable index {name!r}")
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_INDEX, db_info, info, f"ALTER TABLE {q(table)} DROP INDEX {q(name)}")
            job.raw_args = [{"O": index.name, "L": index.name.lower()}, False]

            def with_state(t: TableInfo, state: int) -> TableInfo:
                if state == S.NONE:
                    return replace(t, indices=[i for i in t.indices if i.id != index.id])
                return replace(t, indices=[replace(i, state=state) if i.id == index.id else i for i in t.indices])

            states = (S.WRITE_ONLY, S.DELETE_ONLY, S.DELETE_REORGANIZATION, S.NONE)
            return self._run_table_steps(job, db_info, info, [(s, lambda t, s=s: with_state(t, s)) for s in states])

    # ---- partitions ------------------------------------------------------------------------

    def add_partition(self, db: str, table: str, name: str, less_than: int | str) -> DDLJob:
        """RANGE only: none -> replica-only (adding_definitions) -> public (definitions)."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            pinfo = self._partition(info, part.RANGE)
            if any(d.name.lower() == name.lower() for d in pinfo.definitions):
                raise InputError(f"table {db}.{table} already has partition {name!r}")
            part.check_range_bounds([part.bound_of(d) for d in pinfo.definitions] + [less_than])
            job_id, pid = self._catalog.alloc_ids(2)
            bound = "MAXVALUE" if less_than == part.MAXVALUE else str(less_than)
            query = f"ALTER TABLE {q(table)} ADD PARTITION (PARTITION {q(name)} VALUES LESS THAN ({bound}))"
            job = self._job(job_id, ActionType.ADD_TABLE_PARTITION, db_info, info, query)
            new_def = part.definition(pid, name, less_than)

            def adding(t: TableInfo) -> TableInfo:
                return replace(t, partition=replace(copy.deepcopy(t.partition), adding_definitions=[new_def]))

            def public(t: TableInfo) -> TableInfo:
                p = copy.deepcopy(t.partition)
                return replace(t, partition=replace(p, definitions=p.definitions + [new_def], adding_definitions=[]))

            job.raw_args = [replace(copy.deepcopy(pinfo), definitions=[new_def]).to_json()]
            return self._run_table_steps(job, db_info, info, [(S.REPLICA_ONLY, adding), (S.PUBLIC, public)],
                                         split_ids=[pid])

    def drop_partition(self, db: str, table: str, name: str) -> DDLJob:
        """public -> delete-only (dropping_definitions) -> delete-reorg -> none."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            pinfo = self._partition(info, part.RANGE)
            dropped = self._definition(info, name)
            if len(pinfo.definitions) == 1:
                raise InputError(f"drop partition {name!r}: cannot drop the only partition; drop the table")
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_TABLE_PARTITION, db_info, info,
                            f"ALTER TABLE {q(table)} DROP PARTITION {q(name)}")
            job.raw_args = [[dropped.name]]

            def dropping(t: TableInfo) -> TableInfo:
                p = copy.deepcopy(t.partition)
                kept = [d for d in p.definitions if d.id != dropped.id]
                return replace(t, partition=replace(p, definitions=kept, dropping_definitions=[dropped]))

            def done(t: TableInfo) -> TableInfo:
                return replace(t, partition=replace(copy.deepcopy(t.partition), dropping_definitions=[]))

            steps = [(S.DELETE_ONLY, dropping), (S.DELETE_REORGANIZATION, lambda t: t), (S.NONE, done)]
            return self._run_table_steps(job, db_info, info, steps)

    def truncate_partition(self, db: str, table: str, name: str) -> DDLJob:
        """The partition gets a new physical id; its old rows stay behind the old id."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            self._partition(info, None)
            old = self._definition(info, name)
            job_id, pid = self._catalog.alloc_ids(2)
            job = self._job(job_id, ActionType.TRUNCATE_TABLE_PARTITION, db_info, info,
                            f"ALTER TABLE {q(table)} TRUNCATE PARTITION {q(name)}")
            job.raw_args = [[old.id], [pid]]

            def truncate(t: TableInfo) -> TableInfo:
                p = copy.deepcopy(t.partition)
                defs = [replace(d, id=pid, raw={**d.raw, "id": pid}) if d.id == old.id else d for d in p.definitions]
                return replace(t, partition=replace(p, definitions=defs))

            return self._run_table_steps(job, db_info, info, [(S.PUBLIC, truncate)], split_ids=[pid])

    # ---- machinery -------------------------------------------------------------------------

    def _job(self, job_id: int, action: ActionType, db: DBInfo, table: TableInfo | None, query: str) -> DDLJob:
        return DDLJob(id=job_id, type=action, schema_id=db.id, table_id=table.id if table else 0,
                      schema_name=db.name, table_name=table.name if table else "", state=JobState.QUEUEING,
                      query=query)

    @staticmethod
    def _column(info: TableInfo, name: str) -> Any:
        col = info.column_by_name(name)
        if col is None:
            raise InputError(f"table {info.name} has no column {name!r}")
        return col

    @staticmethod
    def _partition(info: TableInfo, kind: int | None) -> PartitionInfo:
        if info.partition is None or (kind is not None and info.partition.type != kind):
            wanted = {part.RANGE: "RANGE-", None: ""}[kind]
            raise InputError(f"table {info.name} is not {wanted}partitioned")
        return info.partition

    @staticmethod
    def _definition(info: TableInfo, name: str) -> Any:
        defn = next((d for d in info.partition.definitions if d.name.lower() == name.lower()), None)
        if defn is None:
            raise InputError(f"table {info.name} has no partition {name!r}")
        return defn

    @staticmethod
    def _updated(info: TableInfo, txn: KvTxn, **changes: Any) -> TableInfo:
        """A changed copy (never mutate: in-flight DML holds the old object), stamped like `UpdateTable`."""
        return replace(copy.deepcopy(info), update_timestamp=txn.start_ts, **changes)

    def _run_table_steps(self, job: DDLJob, db_info: DBInfo, info: TableInfo,
                         transitions: list[tuple[int, Callable[[TableInfo], TableInfo]]],
                         split_ids: Sequence[int] = ()) -> DDLJob:
        current = {"t": info}

        def step(fn: Callable[[TableInfo], TableInfo]) -> Callable[[KvTxn], None]:
            def apply(txn: KvTxn) -> None:
                current["t"] = self._updated(fn(current["t"]), txn)
                self._catalog.put_table(txn, db_info.id, current["t"])
            return apply

        steps = [Step(state, step(fn)) for state, fn in transitions]
        return self._run(JobPlan(job, steps, lambda: (None, current["t"]), split_ids=split_ids))

    def _run(self, plan: JobPlan) -> DDLJob:
        job, catalog = plan.job, self._catalog
        schema_ids = plan.schema_ids or jr.schema_ids_text(job)
        table_ids = plan.table_ids or jr.table_ids_text(job)
        with self._schema_lock:
            txn = KvTxn(self._cluster)
            job.start_ts = txn.start_ts
            catalog.write_next_global_id(txn)
            txn.put(jr.job_row_key(job.id), jr.job_row_value(job, schema_ids, table_ids, processing=False))
            txn.commit()
        for i, step in enumerate(plan.steps):
            last = i == len(plan.steps) - 1
            with self._schema_lock:
                txn = KvTxn(self._cluster)
                if i == 0:
                    job.real_start_ts = txn.start_ts
                step.apply(txn)
                version = catalog.bump_schema_version(txn)
                catalog.write_diff(txn, self._diff(job, version, plan))
                job.state = JobState.DONE if last else JobState.RUNNING
                job.schema_state = step.schema_state
                if last:
                    job.schema_version = version
                    job.db_info, job.table_info = plan.binlog()
                txn.put(jr.job_row_key(job.id), jr.job_row_value(job, schema_ids, table_ids, processing=True))
                done_ts = txn.commit()
        for physical_id in plan.split_ids:
            self._cluster.split_table(physical_id)
        done = copy.deepcopy(job)
        job.state = JobState.SYNCED
        with self._schema_lock:
            txn = KvTxn(self._cluster)
            txn.delete(jr.job_row_key(job.id))
            txn.put(jr.history_row_key(job.id), jr.history_row_value(job, job.schema_name, job.table_name,
                                                                    schema_ids, table_ids))
            txn.commit()
        done.finished_ts = done_ts  # what TiCDC sets from the done row's commit ts (docs/wire.md#tidb_ddl_job-row)
        return done

    @staticmethod
    def _diff(job: DDLJob, version: int, plan: JobPlan) -> dict:
        """SchemaDiff JSON (pkg/meta/model SchemaDiff): truncate names old and new table ids."""
        return {
            "version": version,
            "type": int(job.type),
            "schema_id": job.schema_id,
            "table_id": plan.new_table_id or job.table_id,
            "old_table_id": job.table_id if plan.new_table_id else 0,
            "old_schema_id": plan.old_schema_id,
            "regenerate_schema_map": False,
            "affected_options": None,
        }


# ---- CREATE TABLE pieces ------------------------------------------------------------------------


def build_table(table_id: int, name: str, defs: list[ColumnDef], primary_key: Sequence[str] | None,
                clustered: bool | None, indexes: Sequence[tuple[str, Sequence[str], bool]]) -> TableInfo:
    pk_names = [n.lower() for n in primary_key] if primary_key else [d.name.lower() for d in defs if d.primary_key]
    names = [d.name.lower() for d in defs]
    if len(set(names)) != len(names):
        raise InputError(f"table {name}: duplicate column names")
    missing = [n for n in pk_names if n not in names]
    if missing:
        raise InputError(f"table {name}: primary key names unknown columns {missing}")
    defs = [replace(d, primary_key=d.name.lower() in pk_names) for d in defs]
    columns = [build_column(d, i + 1, i) for i, d in enumerate(defs)]
    info = TableInfo(id=table_id, name=name, columns=columns, max_col_id=len(columns))
    pk_cols = [c for c in columns if c.name.lower() in pk_names]
    single_int = len(pk_cols) == 1 and pk_cols[0].field_type.tp in mt.INTEGER_TYPES
    if pk_cols and single_int and clustered is not False:
        info.pk_is_handle = True
    elif pk_cols:
        if clustered:
            info.is_common_handle, info.common_handle_version = True, 1
        ordered = sorted(pk_cols, key=lambda c: pk_names.index(c.name.lower()))
        info.indices.append(IndexInfo(id=1, name="PRIMARY", unique=True, primary=True,
                                      columns=[IndexColumn(c.name, c.offset) for c in ordered]))
    for idx_name, idx_columns, unique in indexes:
        cols = []
        for c in idx_columns:
            col = info.column_by_name(c)
            if col is None:
                raise InputError(f"table {name}: index {idx_name!r} names unknown column {c!r}")
            cols.append(IndexColumn(col.name, col.offset))
        info.indices.append(IndexInfo(id=len(info.indices) + 1, name=idx_name, columns=cols, unique=unique))
    info.max_idx_id = len(info.indices)
    return info


def check_partition_column(info: TableInfo) -> None:
    """TiDB: the partitioning column must be an integer and part of every unique key."""
    column = info.column_by_name(part.partition_column(info))
    if column is None or column.field_type.tp not in mt.INTEGER_TYPES:
        raise InputError(f"table {info.name}: partition column must be an existing integer column")
    for idx in info.indices:
        if idx.unique and column.name.lower() not in {c.name.lower() for c in idx.columns}:
            raise InputError(f"table {info.name}: a UNIQUE/PRIMARY index must include the partition column")


def _renumber(info: TableInfo) -> TableInfo:
    """Offsets are positions in `cols`; index columns point at them (docs/encoding.md#schema-json)."""
    columns = [replace(c, offset=i) for i, c in enumerate(info.columns)]
    by_name = {c.name.lower(): c.offset for c in columns}
    indices = [replace(idx, columns=[replace(ic, offset=by_name[ic.name.lower()]) for ic in idx.columns])
               for idx in info.indices]
    return replace(info, columns=columns, indices=indices)


def column_sql(col: Any) -> str:
    ft = col.field_type
    type_name = mt.TYPE_NAMES.get(ft.tp, "unknown")
    if ft.tp == mt.TYPE_VARCHAR and mt.is_binary_string(ft):
        type_name = "varbinary"
    elif ft.tp == mt.TYPE_STRING and mt.is_binary_string(ft):
        type_name = "binary"
    if ft.elems:
        args = ",".join("'" + e.replace("'", "''") + "'" for e in ft.elems)
    elif ft.tp == mt.TYPE_NEWDECIMAL:
        args = f"{ft.flen},{ft.decimal}"
    elif ft.tp in (mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP, mt.TYPE_DURATION):
        args = str(ft.decimal) if ft.decimal > 0 else ""
    elif ft.tp in (mt.TYPE_VARCHAR, mt.TYPE_STRING, mt.TYPE_BIT):
        args = str(ft.flen)
    else:
        args = ""
    text = f"{q(col.name)} {type_name}" + (f"({args})" if args else "")
    if ft.flag & mt.UNSIGNED_FLAG and ft.tp in mt.INTEGER_TYPES:
        text += " unsigned"
    if mt.is_not_null(ft.flag):
        text += " NOT NULL"
    if ft.flag & mt.AUTO_INCREMENT_FLAG:
        text += " AUTO_INCREMENT"
    if col.default is not None:
        text += " DEFAULT '" + str(col.default).replace("'", "''") + "'"
    return text


def create_table_sql(name: str, info: TableInfo) -> str:
    parts = [column_sql(c) for c in info.columns]
    handle = info.handle_column()
    if handle is not None:
        parts.append(f"PRIMARY KEY ({q(handle.name)}) /*T![clustered_index] CLUSTERED */")
    for idx in info.indices:
        cols = ", ".join(q(c.name) for c in idx.columns)
        if idx.primary:
            kind = "CLUSTERED" if info.is_common_handle else "NONCLUSTERED"
            parts.append(f"PRIMARY KEY ({cols}) /*T![clustered_index] {kind} */")
        else:
            parts.append(f"{'UNIQUE ' if idx.unique else ''}KEY {q(idx.name)} ({cols})")
    sql = f"CREATE TABLE {q(name)} (" + ", ".join(parts) + ")"
    if info.partition is not None:
        column = q(part.partition_column(info))
        if info.partition.type == part.HASH:
            sql += f" PARTITION BY HASH ({column}) PARTITIONS {len(info.partition.definitions)}"
        else:
            defs = ", ".join(f"PARTITION {q(d.name)} VALUES LESS THAN ({part.bound_of(d)})"
                             for d in info.partition.definitions)
            sql += f" PARTITION BY RANGE ({column}) ({defs})"
    return sql
