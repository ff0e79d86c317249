"""DDL as TiDB's DDL owner runs it: a queued job, one transaction per schema-state step, a finish.

A job allocates its ids and queues its row; each online-schema-change step (e.g. ADD COLUMN
none -> delete-only -> write-only -> write-reorg -> public) is one transaction writing the meta
keys, a new schema version with its diff and the job row; the done row then moves to
tidb_ddl_history. Readers meet intermediate states and running jobs as on a real cluster. Several
ALTER TABLE actions are one multi-schema change job. Every job keeps the statement's text as
`query`; errors carry TiDB's codes (sql_errors.py).

More: docs/internals.md#ddl.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState, SchemaState
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.sim.tidb import ddl_job_row as jr
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb import table_changes as tc
from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.coerce import Mode
from tidelake.sim.tidb.kvtxn import KvTxn
from tidelake.sim.tidb.show_create import q, show_create_table
from tidelake.sim.tidb.table_spec import IndexSpec, TableSpec, build_table_info, from_columns
from tidelake.sim.tidb.types import ColumnDef, column_def, parse_field_type, with_charset

S = SchemaState


@dataclass
class Step:
    """One schema-state transition: its meta writes run inside the step's transaction."""

    schema_state: int
    apply: Callable[[KvTxn], None]
    sub_job: int = -1  # index of the multi-schema change sub-job it advances (-1: none)


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
    multiple: Callable[[], list[TableInfo]] | None = None
    rewrites: Sequence[int] = ()  # logical table ids whose rows the job rewrites (see DDLExecutor.reorg_epoch)
    revert: Callable[[KvTxn], None] | None = None  # restores what the steps before a failed one changed


def metadata_only_change(old: Any, new: Any) -> bool:
    """TiDB `needChangeColumnData` is false: the column keeps its stored bytes."""
    return not tc.needs_row_change(old, new)


class DDLExecutor:
    """The DDL owner of one simulated TiDB: jobs run one at a time, like TiDB's DDL owner."""

    def __init__(self, cluster: Any, catalog: Catalog, schema_lock: threading.RLock) -> None:
        self._cluster = cluster
        self._catalog = catalog
        self._schema_lock = schema_lock
        self._ddl_lock = threading.Lock()
        self.reorg_epoch: dict[int, int] = {}  # table id -> count of jobs that rewrote its rows
        self.reorg_running: set[int] = set()  # table ids a rewriting job is copying now
        # Seconds between a job's steps: TiDB waits after each step until every TiDB has loaded its
        # schema version (pkg/ddl `waitVersionSynced`), so a job's meta is mid-way for a while.
        self.step_pause_s = 0.0

    # ---- databases -------------------------------------------------------------------------

    def create_database(self, name: str, charset: str = "utf8mb4", collate: str = "utf8mb4_bin",
                        query: str | None = None) -> DDLJob:
        with self._ddl_lock:
            if name.lower() in self._catalog.dbs:
                raise er.sql_error(er.DB_CREATE_EXISTS, f"Can't create database '{name}'; database exists")
            job_id, db_id = self._catalog.alloc_ids(2)
            db = DBInfo(id=db_id, name=name, charset=charset, collate=collate)
            job = self._job(job_id, ActionType.CREATE_SCHEMA, db, None, query or f"CREATE DATABASE {q(name)}")
            job.raw_args = [db.to_json()]

            def create(txn: KvTxn) -> None:
                self._catalog.put_db(txn, db)

            return self._run(JobPlan(job, [Step(S.PUBLIC, create)], lambda: (db, None)))

    def drop_database(self, name: str, query: str | None = None) -> DDLJob:
        with self._ddl_lock:
            db = self._catalog.db(name)
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_SCHEMA, db, None, query or f"DROP DATABASE {q(name)}")
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
                     partition: dict | None = None, query: str | None = None) -> DDLJob:
        """CREATE TABLE from the short form. Clustering follows TiDB's older `INT_ONLY` mode: a
        single integer PK is the row handle; other PKs are non-clustered (`_tidb_rowid`) unless
        `clustered=True` (common handle). CREATE TABLE statements use `create_table_spec`."""
        spec = from_columns(name, [column_def(c) for c in columns], primary_key, clustered, indexes, partition)
        return self.create_table_spec(db, spec, query=query)

    def create_table_spec(self, db: str, spec: TableSpec, query: str | None = None) -> DDLJob:
        with self._ddl_lock:
            db_info = self._catalog.db(db)
            if self._catalog.has_table(db, spec.name):
                raise er.table_exists(spec.name)
            job_id, table_id, *part_ids = self._catalog.alloc_ids(1 + spec.id_count)
            info = build_table_info(spec, table_id, part_ids)
            return self._create(db_info, info, job_id, query)

    def create_table_like(self, db: str, name: str, source_db: str, source: str, query: str | None = None) -> DDLJob:
        """CREATE TABLE ... LIKE: the source's TableInfo under new ids (pkg/ddl `BuildTableInfoWithLike`)."""
        with self._ddl_lock:
            db_info, src = self._catalog.db(db), self._catalog.table(source_db, source)
            if self._catalog.has_table(db, name):
                raise er.table_exists(name)
            n_parts = len(src.partition.definitions) if src.partition else 0
            job_id, table_id, *part_ids = self._catalog.alloc_ids(2 + n_parts)
            info = copy.deepcopy(src)
            info.id, info.name = table_id, name
            info.raw = {**(info.raw or {}), "auto_inc_id": 0, "auto_rand_id": 0}
            if info.partition is not None:
                defs = [replace(d, id=pid, raw={**d.raw, "id": pid}) for d, pid in zip(info.partition.definitions, part_ids)]
                info.partition = part.with_definitions(info.partition, defs, adding=[], dropping=[])
            return self._create(db_info, info, job_id, query)

    def _create(self, db_info: DBInfo, info: TableInfo, job_id: int, query: str | None) -> DDLJob:
        job = self._job(job_id, ActionType.CREATE_TABLE, db_info, info, query or show_create_table(info))

        def create(txn: KvTxn) -> None:
            info.update_timestamp = txn.start_ts
            self._catalog.put_table(txn, db_info.id, info)

        job.raw_args = [info.to_json(), False]
        plan = JobPlan(job, [Step(S.PUBLIC, create)], lambda: (None, info), split_ids=info.physical_ids())
        return self._run(plan)

    def drop_table(self, db: str, name: str, query: str | None = None) -> DDLJob:
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, name)
            (job_id,) = self._catalog.alloc_ids(1)
            job = self._job(job_id, ActionType.DROP_TABLE, db_info, info, query or f"DROP TABLE {q(name)}")
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

    def truncate_table(self, db: str, name: str, query: str | None = None) -> DDLJob:
        """New physical ids for the table and its partitions; the old rows stay behind the old ids."""
        with self._ddl_lock:
            db_info, old = self._catalog.db(db), self._catalog.table(db, name)
            n_parts = len(old.partition.definitions) if old.partition else 0
            job_id, new_id, *part_ids = self._catalog.alloc_ids(2 + n_parts)
            new = copy.deepcopy(old)
            new.id = new_id
            if new.partition:
                defs = [replace(d, id=pid, raw={**d.raw, "id": pid}) for d, pid in zip(new.partition.definitions, part_ids)]
                new.partition = part.with_definitions(new.partition, defs)
            job = self._job(job_id, ActionType.TRUNCATE_TABLE, db_info, old, query or f"TRUNCATE TABLE {q(name)}")
            job.raw_args = [new_id, False, part_ids]

            def truncate(txn: KvTxn) -> None:
                new.update_timestamp = txn.start_ts
                base = self._catalog.rowid_bases.get(old.id)
                self._catalog.drop_table(txn, db_info.id, old)
                self._catalog.put_table(txn, db_info.id, new)
                if base is not None:  # TiDB keeps allocating after the old table's ids
                    self._catalog.write_rowid_base(txn, db_info.id, new.id, base)

            plan = JobPlan(job, [Step(S.PUBLIC, truncate)], lambda: (None, new), new_table_id=new_id,
                           table_ids=jr.table_ids_text(job, new_id), split_ids=new.physical_ids())
            return self._run(plan)

    def rename_table(self, db: str, name: str, new_name: str, new_db: str | None = None,
                     query: str | None = None) -> DDLJob:
        """ActionRenameTable in two steps, rename then finish (pkg/ddl `onRenameTable`, `finishJobRenameTable`)."""
        return self.rename_tables([(db, name, new_db or db, new_name)], query=query)

    def rename_tables(self, pairs: Sequence[tuple[str, str, str, str]], query: str | None = None) -> DDLJob:
        """RENAME TABLE a TO b[, c TO d ...]: pairs apply in order, each seeing the names the pairs before
        it left (a swap a->tmp, b->a, tmp->b renames each table once). One pair is ActionRenameTable
        (args [old schema id, new name, old schema name]); more are ActionRenameTables (args
        [old schema ids, new schema ids, new names, table ids, old schema names, old table names], binlog
        MultipleTableInfos: each pair's table as that pair left it, so a swapped table appears twice,
        under its intermediate name first; pkg/ddl `onRenameTables`,
        `finishJobRenameTables`)."""
        with self._ddl_lock:
            names = {(db_key, table_key): t.id for db_key, db_info in self._catalog.dbs.items()
                     for table_key, t in self._catalog.tables.get(db_info.id, {}).items()}
            moves = []
            for old_db, old_name, to_db, to_name in pairs:
                src_db, dst_db = self._catalog.db(old_db), self._catalog.db(to_db)
                key = (old_db.lower(), old_name.lower())
                if key not in names:
                    raise er.no_such_table(old_db, old_name)
                if (to_db.lower(), to_name.lower()) in names:
                    raise er.table_exists(to_name)
                table_id = names.pop(key)
                names[(to_db.lower(), to_name.lower())] = table_id
                moves.append((src_db, old_name, dst_db, to_name, table_id))
            by_id = {info.id: info for tables in self._catalog.tables.values() for info in tables.values()}
            (job_id,) = self._catalog.alloc_ids(1)
            first_src, first_old, first_dst, _first_new, first_id = moves[0]
            single = len(moves) == 1
            action = ActionType.RENAME_TABLE if single else ActionType.RENAME_TABLES
            text = query or "RENAME TABLE " + ", ".join(f"{q(s.name)}.{q(o)} TO {q(d.name)}.{q(n)}"
                                                        for s, o, d, n, _ in moves)
            job = self._job(job_id, action, first_dst, by_id[first_id], text)
            job.table_name = first_old.lower()
            if single:
                job.raw_args = [first_src.id, tc._cistr(moves[0][3]), tc._cistr(first_src.name)]
            else:
                job.raw_args = [[m[0].id for m in moves], [m[2].id for m in moves], [tc._cistr(m[3]) for m in moves],
                                [m[4] for m in moves], [tc._cistr(m[0].name) for m in moves],
                                [tc._cistr(m[1]) for m in moves]]
            final: dict[int, tuple[int, TableInfo]] = {}
            steps: list[TableInfo] = []  # each pair's table as that pair left it

            def rename(txn: KvTxn) -> None:
                steps.clear()
                for src, old_name, dst, new_name, table_id in moves:
                    db_id, info = final.get(table_id, (src.id, by_id[table_id]))
                    renamed = self._updated(info, txn, name=new_name)
                    base = self._catalog.rowid_bases.get(table_id)
                    if db_id == dst.id:
                        self._catalog.put_table(txn, dst.id, renamed, old_name=info.name)
                    else:
                        self._catalog.drop_table(txn, db_id, info)
                        self._catalog.put_table(txn, dst.id, renamed)
                        if base is not None:
                            self._catalog.write_rowid_base(txn, dst.id, table_id, base)
                    final[table_id] = (dst.id, renamed)
                    steps.append(renamed)

            def finish(txn: KvTxn) -> None:
                return None

            schema_ids = ",".join(sorted({str(m[0].id) for m in moves} | {str(m[2].id) for m in moves}))
            plan = JobPlan(job, [Step(S.PUBLIC, rename), Step(S.PUBLIC, finish)],
                           lambda: (None, final[moves[-1][4]][1]), old_schema_id=first_src.id,
                           schema_ids=schema_ids if not single else jr.schema_ids_text(job, first_src.id),
                           table_ids=",".join(str(m[4]) for m in moves),
                           multiple=None if single else (lambda: list(steps)))
            return self._run(plan)

    # ---- ALTER TABLE -----------------------------------------------------------------------

    def alter_table(self, db: str, table: str, plan: Callable[[TableInfo], list[tc.TableChange]],
                    query: str | None = None) -> DDLJob:
        """Run the changes `plan` makes of the current table: one change is its own job, several are
        one multi-schema change job whose sub-jobs run in order (each planned on the table the ones
        before it leave)."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            changes = plan(info)
            if not changes:
                raise er.sql_error(er.UNKNOWN, "nothing to alter")
            (job_id,) = self._catalog.alloc_ids(1)
            text = query or f"ALTER TABLE {q(info.name)} " + ", ".join(c.query for c in changes)
            if len(changes) == 1:
                change = changes[0]
                job = self._job(job_id, change.action, db_info, info, text)
                job.raw_args = change.raw_args
                return self._run_table_steps(job, db_info, info, change.steps, split_ids=change.split_ids,
                                             rewrites=[info.id] if change.rewrites_rows else ())
            return self._run_multi(job_id, db_info, info, changes, text)

    def _run_multi(self, job_id: int, db_info: DBInfo, info: TableInfo, changes: list[tc.TableChange],
                   text: str) -> DDLJob:
        """ActionMultiSchemaChange: `multi_schema_info.sub_jobs` carry each change's type, args, state and
        schema state (pkg/meta/model `MultiSchemaInfo`, `SubJob`); each sub-job step is a step of the job.
        In two phases, as pkg/ddl/multi_schema_change.go `onMultiSchemaChange` runs them: each sub-job in
        turn up to its last revertible state (`_revertible_steps`), then each in turn to its end, so no
        change is public before every one of them has reached the point it cannot be rolled back from."""
        job = self._job(job_id, ActionType.MULTI_SCHEMA_CHANGE, db_info, info, text)
        subs = [{"type": int(c.action), "raw_args": c.raw_args, "schema_state": 0, "snapshot_ver": 0,
                 "real_start_ts": 0, "revertible": True, "state": int(JobState.QUEUEING), "row_count": 0,
                 "warning": None, "schema_version": 0, "reorg_tp": 0, "use_cloud": False} for c in changes]
        multi = job.raw["multi_schema_info"] = {"sub_jobs": subs, "revertible": True, "seq": 0}
        revertible = [_revertible_steps(c) for c in changes]
        transitions = [(state, fn, index, False, n == len(change.steps) - 1)
                       for index, change in enumerate(changes)
                       for n, (state, fn) in enumerate(change.steps[:revertible[index]])]
        transitions += [(state, fn, index, True, n == len(change.steps) - 1)
                        for index, change in enumerate(changes)
                        for n, (state, fn) in enumerate(change.steps) if n >= revertible[index]]
        current = {"t": info}
        steps = []
        for state, fn, index, final_phase, last_of_sub in transitions:
            def apply(txn: KvTxn, fn: Callable = fn, index: int = index, state: int = state,
                      final_phase: bool = final_phase, last_of_sub: bool = last_of_sub) -> None:
                current["t"] = self._updated(fn(current["t"], txn), txn)
                self._catalog.put_table(txn, db_info.id, current["t"])
                sub = subs[index]
                sub["schema_state"], sub["real_start_ts"] = int(state), sub["real_start_ts"] or txn.start_ts
                sub["state"] = int(JobState.DONE if last_of_sub else JobState.RUNNING)
                sub["revertible"] = not final_phase
                multi["revertible"] = multi["revertible"] and not final_phase
            steps.append(Step(state, apply, sub_job=index))
        split = [pid for c in changes for pid in c.split_ids]
        rewrites = [info.id] if any(c.rewrites_rows for c in changes) else ()
        return self._run(JobPlan(job, steps, lambda: (None, current["t"]), split_ids=split, rewrites=rewrites,
                                 revert=self._reverter(db_info, info)))

    # Single-action shorthands of the Python front (the workload, tests).

    def add_column(self, db: str, table: str, column: ColumnDef | tuple, position: Any = None,
                   query: str | None = None) -> DDLJob:
        now = datetime.now()
        return self.alter_table(db, table, lambda t: [tc.add_column(t, column_def(column), position, now)], query)

    def drop_column(self, db: str, table: str, name: str, query: str | None = None) -> DDLJob:
        return self.alter_table(db, table, lambda t: [tc.drop_column(t, name)], query)

    def rename_column(self, db: str, table: str, name: str, new_name: str, query: str | None = None) -> DDLJob:
        """RENAME COLUMN is ActionModifyColumn (12) in TiDB; no separate code (docs/wire.md#actiontype-codes)."""
        return self.alter_table(db, table, lambda t: [tc.rename_column(t, name, new_name)], query)

    def modify_column(self, db: str, table: str, name: str, new_type: str | ColumnDef, nullable: bool | None = None,
                      query: str | None = None, position: Any = None, mode: Mode | None = None) -> DDLJob:
        """MODIFY COLUMN: metadata only when the stored bytes stay valid, else TiDB's row rewrite."""
        return self.alter_table(db, table, lambda t: [self.modify_change(t, name, new_type, nullable, position, mode)],
                                query)

    def modify_change(self, t: TableInfo, name: str, new_type: str | ColumnDef, nullable: bool | None = None,
                      position: Any = None, mode: Mode | None = None) -> tc.TableChange:
        """The MODIFY COLUMN change of `t` (also a part of a multi-schema change): a type given as
        text keeps the column's nullability, default, comment and, to a text type, its charset."""
        old = tc.column_of(t, name)
        if isinstance(new_type, ColumnDef):
            defn = new_type
        else:
            not_null = mt.is_not_null(old.field_type.flag) if nullable is None else not nullable
            ft = old.field_type
            string_like = ft.tp in mt.STRING_TYPES and not mt.is_binary_string(ft)
            defn = ColumnDef(old.name, new_type, nullable=not not_null, default=old.default,
                             comment=old.comment,
                             charset=ft.charset if string_like and _is_text(new_type) else None,
                             collate=ft.collate if string_like and _is_text(new_type) else None)
        return tc.modify_column(t, name, defn, position, mode, self._cluster)

    def add_index(self, db: str, table: str, name: str, columns: Sequence[str | tuple[str, int]], unique: bool = False,
                  query: str | None = None) -> DDLJob:
        parts = tuple((c, -1) if isinstance(c, str) else (c[0], c[1]) for c in columns)
        spec = IndexSpec(name, parts, unique=unique)
        return self.alter_table(db, table, lambda t: [tc.add_index(t, spec, self._cluster)], query)

    def drop_index(self, db: str, table: str, name: str, query: str | None = None) -> DDLJob:
        return self.alter_table(db, table, lambda t: [tc.drop_index(t, name)], query)

    def add_partition(self, db: str, table: str, name: str, less_than: int | str, query: str | None = None) -> DDLJob:
        """RANGE only (the short form): one partition LESS THAN `less_than`."""
        def plan(t: TableInfo) -> list[tc.TableChange]:
            (pid,) = self._catalog.alloc_ids(1)
            return [tc.add_partitions(t, [(name, [str(less_than)])], [pid])]
        return self.alter_table(db, table, plan, query)

    def drop_partition(self, db: str, table: str, name: str, query: str | None = None) -> DDLJob:
        return self.alter_table(db, table, lambda t: [tc.drop_partitions(t, [name])], query)

    def truncate_partition(self, db: str, table: str, name: str, query: str | None = None) -> DDLJob:
        """The partition gets a new physical id; its old rows stay behind the old id."""
        def plan(t: TableInfo) -> list[tc.TableChange]:
            (pid,) = self._catalog.alloc_ids(1)
            return [tc.truncate_partitions(t, [name], [pid])]
        return self.alter_table(db, table, plan, query)

    # ---- machinery -------------------------------------------------------------------------

    def _job(self, job_id: int, action: ActionType, db: DBInfo, table: TableInfo | None, query: str) -> DDLJob:
        return DDLJob(id=job_id, type=action, schema_id=db.id, table_id=table.id if table else 0,
                      schema_name=db.name, table_name=table.name if table else "", state=JobState.QUEUEING,
                      query=query)

    @staticmethod
    def _updated(info: TableInfo, txn: KvTxn, **changes: Any) -> TableInfo:
        """A changed copy (never mutate: in-flight DML holds the old object), stamped like `UpdateTable`."""
        return replace(copy.deepcopy(info), update_timestamp=txn.start_ts, **changes)

    def _run_table_steps(self, job: DDLJob, db_info: DBInfo, info: TableInfo,
                         transitions: list[tuple[int, tc.Transition]], split_ids: Sequence[int] = (),
                         rewrites: Sequence[int] = ()) -> DDLJob:
        current = {"t": info}

        def step(fn: tc.Transition) -> Callable[[KvTxn], None]:
            def apply(txn: KvTxn) -> None:
                current["t"] = self._updated(fn(current["t"], txn), txn)
                self._catalog.put_table(txn, db_info.id, current["t"])
            return apply

        steps = [Step(state, step(fn)) for state, fn in transitions]
        return self._run(JobPlan(job, steps, lambda: (None, current["t"]), split_ids=split_ids, rewrites=rewrites,
                                 revert=self._reverter(db_info, info)))

    def _reverter(self, db_info: DBInfo, info: TableInfo) -> Callable[[KvTxn], None]:
        def revert(txn: KvTxn) -> None:
            self._catalog.put_table(txn, db_info.id, self._updated(info, txn))
        return revert

    def _run(self, plan: JobPlan) -> DDLJob:
        """Queue the job, run its steps, finish it into the history. A step that fails rolls back its
        own transaction; the job is then cancelled (nothing of it became visible) or, after some steps,
        rolled back by one more step that restores the table (`plan.revert`), as TiDB rolls back a
        job, and the error is raised. TiCDC replicates neither (only done jobs)."""
        job, catalog = plan.job, self._catalog
        schema_ids = plan.schema_ids or jr.schema_ids_text(job)
        table_ids = plan.table_ids or jr.table_ids_text(job)
        with self._schema_lock:
            txn = KvTxn(self._cluster)
            job.start_ts = txn.start_ts
            catalog.write_next_global_id(txn)
            txn.put(jr.job_row_key(job.id), jr.job_row_value(job, schema_ids, table_ids, processing=False))
            txn.commit()
        self.reorg_running.update(plan.rewrites)
        try:
            done_ts = self._run_steps(plan, schema_ids, table_ids)
        finally:
            self.reorg_running.difference_update(plan.rewrites)
        for physical_id in plan.split_ids:
            self._cluster.split_table(physical_id)
        done = copy.deepcopy(job)
        job.state = JobState.SYNCED
        self._to_history(job, schema_ids, table_ids)
        done.finished_ts = done_ts  # what TiCDC sets from the done row's commit ts (docs/wire.md#tidb_ddl_job-row)
        return done

    def _run_steps(self, plan: JobPlan, schema_ids: str, table_ids: str) -> int:
        """Each step in its own transaction; the done step's commit ts. While a job rewrites a table's
        rows (plan.rewrites), a DML transaction that wrote the table cannot commit (Txn.commit, 8028):
        its rows would miss the copy, as TiDB's would without its double writes."""
        job, catalog = plan.job, self._catalog
        done_ts = 0
        for i, step in enumerate(plan.steps):
            last = i == len(plan.steps) - 1
            with self._schema_lock:
                txn = KvTxn(self._cluster)
                if i == 0:
                    job.real_start_ts = txn.start_ts
                try:
                    step.apply(txn)
                except Exception:
                    txn.rollback()
                    self._abandon(plan, schema_ids, table_ids, rolled_back=i > 0)
                    raise
                version = catalog.bump_schema_version(txn)
                catalog.write_diff(txn, self._diff(job, version, plan))
                job.state = JobState.DONE if last else JobState.RUNNING
                job.schema_state = step.schema_state
                if last:
                    job.schema_version = version
                    job.db_info, job.table_info = plan.binlog()
                    job.multiple_table_infos = plan.multiple() if plan.multiple else []
                    for table_id in plan.rewrites:
                        self.reorg_epoch[table_id] = self.reorg_epoch.get(table_id, 0) + 1
                txn.put(jr.job_row_key(job.id), jr.job_row_value(job, schema_ids, table_ids, processing=True))
                done_ts = txn.commit()
            if not last and self.step_pause_s:
                time.sleep(self.step_pause_s)
        return done_ts

    def _abandon(self, plan: JobPlan, schema_ids: str, table_ids: str, rolled_back: bool) -> None:
        job = plan.job
        if rolled_back and plan.revert is not None:
            with self._schema_lock:
                txn = KvTxn(self._cluster)
                plan.revert(txn)
                version = self._catalog.bump_schema_version(txn)
                self._catalog.write_diff(txn, self._diff(job, version, plan))
                job.state, job.schema_state = JobState.ROLLBACK_DONE, S.NONE
                txn.put(jr.job_row_key(job.id), jr.job_row_value(job, schema_ids, table_ids, processing=True))
                txn.commit()
        else:
            job.state = JobState.CANCELLED
        self._to_history(job, schema_ids, table_ids)

    def _to_history(self, job: DDLJob, schema_ids: str, table_ids: str) -> None:
        with self._schema_lock:
            txn = KvTxn(self._cluster)
            txn.delete(jr.job_row_key(job.id))
            txn.put(jr.history_row_key(job.id), jr.history_row_value(job, job.schema_name, job.table_name,
                                                                    schema_ids, table_ids))
            txn.commit()

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


def _is_text(type_spec: str) -> bool:
    name = type_spec.strip().split("(")[0].split()[0].lower()
    return name in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")


__all__ = ["DDLExecutor", "JobPlan", "Step", "metadata_only_change", "parse_field_type", "with_charset"]


_ADDING = frozenset({ActionType.ADD_COLUMN, ActionType.ADD_COLUMNS, ActionType.ADD_INDEX, ActionType.ADD_PRIMARY_KEY})


def _revertible_steps(change: tc.TableChange) -> int:
    """How many of a sub-job's steps run before it marks itself non-revertible: an ADD COLUMN, ADD
    INDEX or a MODIFY COLUMN that rewrites the column, all but its public step (pkg/ddl `onAddColumn`,
    `onCreateIndex`, `doModifyColumnTypeWithData` call `MarkNonRevertible` at write-reorganization);
    a DROP or a change of metadata only, none (they mark it before their first step)."""
    adding = change.action in _ADDING or (change.action == ActionType.MODIFY_COLUMN and len(change.steps) > 1)
    return len(change.steps) - 1 if adding else 0
