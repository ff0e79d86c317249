"""Partition DDL that moves rows between physical tables: EXCHANGE, REORGANIZE, PARTITION BY, REMOVE.

Job shapes, args and steps are pingcap/tidb's (pkg/ddl/partition.go `onExchangeTablePartition`,
`onReorganizePartition`; pkg/ddl/executor.go). EXCHANGE swaps two physical ids and moves no key;
REORGANIZE, PARTITION BY and REMOVE PARTITIONING copy the replaced partitions' rows, same handles,
into new physical ids and leave the old keys in place (TiDB's delete-range worker's job). A
transaction that wrote one of the tables before such a job and commits after it is refused
(8028, DDLExecutor.reorg_epoch).

More: docs/sql-front.md#ddl-that-moves-rows-between-physical-tables.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tidelake.codec.ddl_job import ActionType, DDLJob
from tidelake.codec.keys import record_key
from tidelake.codec.row import encode_row
from tidelake.codec.schema import PartitionDefinition, PartitionInfo, TableInfo
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.ddl import DDLExecutor, JobPlan, S, Step
from tidelake.sim.tidb.kvtxn import KvTxn
from tidelake.sim.tidb.show_create import q
from tidelake.sim.tidb.table_changes import definition_of, rows_of
from tidelake.sim.tidb.table_spec import check_partitioning

_ROWID = "_tidb_rowid"


class PartitioningDDL(DDLExecutor):
    """The DDL jobs above; mixed into SimTiDB beside the DDLExecutor's own."""

    # ---- EXCHANGE PARTITION ------------------------------------------------------------------

    def exchange_partition(self, db: str, table: str, partition: str, other_db: str, other: str,
                           validation: bool = True, query: str | None = None) -> DDLJob:
        with self._ddl_lock:
            pt_db, pt = self._catalog.db(db), self._catalog.table(db, table)
            nt_db, nt = self._catalog.db(other_db), self._catalog.table(other_db, other)
            if pt.partition is None:
                raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                                   "Partition management on a not partitioned table is not possible")
            if nt.partition is not None:
                raise er.sql_error((1732, "HY000"), "Table to exchange with partition is partitioned: "
                                                    f"'{other}'")
            _check_same_definition(pt, nt)
            defn = definition_of(pt, partition, "EXCHANGE")
            (job_id,) = self._catalog.alloc_ids(1)
            text = query or (f"ALTER TABLE {q(pt_db.name)}.{q(pt.name)} EXCHANGE PARTITION {q(defn.name)} WITH TABLE "
                             f"{q(nt_db.name)}.{q(nt.name)}" + ("" if validation else " WITHOUT VALIDATION"))
            job = self._job(job_id, ActionType.EXCHANGE_TABLE_PARTITION, nt_db, nt, text)
            job.raw_args = [defn.id, pt_db.id, pt.id, defn.name, validation]
            state: dict[str, TableInfo] = {"pt": pt, "nt": nt}

            def mark(txn: KvTxn) -> None:
                marked = self._updated(state["nt"], txn)
                marked.raw = {**(marked.raw or {}), "exchange_partition_info": {
                    "exchange_partition_id": pt.id, "exchange_partition_def_id": defn.id}}
                state["nt"] = marked
                self._catalog.put_table(txn, nt_db.id, marked)

            def swap(txn: KvTxn) -> None:
                if validation:
                    _check_rows_fit(self._cluster, pt, defn, state["nt"], txn.start_ts)
                old_nt = state["nt"]
                bases = [self._catalog.rowid_bases.get(t.id, 0) for t in (pt, old_nt)]
                new_nt = self._updated(old_nt, txn, id=defn.id)
                new_nt.raw = {**new_nt.raw, "exchange_partition_info": None}
                defs = [replace(d, id=old_nt.id, raw={**d.raw, "id": old_nt.id}) if d.id == defn.id else d
                        for d in pt.partition.definitions]
                new_pt = self._updated(pt, txn, partition=part.with_definitions(pt.partition, defs))
                self._catalog.drop_table(txn, nt_db.id, old_nt)
                self._catalog.put_table(txn, pt_db.id, new_pt)
                self._catalog.put_table(txn, nt_db.id, new_nt)
                for db_id, table_id in ((pt_db.id, pt.id), (nt_db.id, new_nt.id)):
                    self._catalog.write_rowid_base(txn, db_id, table_id, max(bases))
                state["pt"], state["nt"] = new_pt, new_nt

            plan = JobPlan(job, [Step(S.WRITE_ONLY, mark), Step(S.NONE, swap)], lambda: (None, state["pt"]),
                           rewrites=[pt.id, nt.id], revert=self._reverter(nt_db, nt),
                           table_ids=f"{nt.id},{pt.id}", schema_ids=",".join(sorted({str(nt_db.id), str(pt_db.id)})))
            return self._run(plan)

    # ---- REORGANIZE PARTITION / PARTITION BY / REMOVE PARTITIONING ---------------------------

    def reorganize_partition(self, db: str, table: str, names: Sequence[str],
                             definitions: Sequence[tuple[str, Any]], query: str | None = None) -> DDLJob:
        """REORGANIZE PARTITION a, b INTO (...): RANGE partitions next to each other, or LIST ones."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            pinfo = info.partition
            if pinfo is None:
                raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                                   "Partition management on a not partitioned table is not possible")
            if pinfo.type not in (part.RANGE, part.LIST):
                raise er.unsupported_ddl("REORGANIZE PARTITION of HASH/KEY partitions")
            replaced = [definition_of(info, n, "REORGANIZE") for n in names]
            positions = sorted(pinfo.definitions.index(d) for d in replaced)
            if pinfo.type == part.RANGE and positions != list(range(positions[0], positions[0] + len(positions))):
                raise er.sql_error((1519, "HY000"), "When reorganizing a set of partitions they must be in "
                                                    "consecutive order")
            ids = self._catalog.alloc_ids(len(definitions))
            spec = part.PartitionSpec(pinfo.type, expr=pinfo.expr, columns=tuple(pinfo.columns),
                                      definitions=tuple(definitions))
            added = part.build_partition(spec, ids)
            final_defs = (list(pinfo.definitions[: positions[0]]) + list(added.definitions)
                          + list(pinfo.definitions[positions[-1] + 1:]))
            final = part.with_definitions(pinfo, final_defs, adding=[], dropping=[])
            _check_final(info, final)
            text = query or (f"ALTER TABLE {q(info.name)} REORGANIZE PARTITION " + ", ".join(q(d.name) for d in replaced)
                             + " INTO (...)")
            return self._reorganize(ActionType.REORGANIZE_PARTITION, db_info, info, replaced, added, final, 0, text)

    def alter_partitioning(self, db: str, table: str, spec: part.PartitionSpec, query: str | None = None) -> DDLJob:
        """ALTER TABLE ... PARTITION BY: every row copied into the new partitions; the table gets a new id."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            new_table_id, *ids = self._catalog.alloc_ids(1 + spec.size)
            added = part.build_partition(spec, ids)
            probe = replace(info, partition=added)
            from_none = info.partition is None
            current = _as_none_partitioning(info) if from_none else info.partition
            _check_final(probe, added)
            text = query or f"ALTER TABLE {q(info.name)} PARTITION BY ..."
            return self._reorganize(ActionType.ALTER_TABLE_PARTITIONING, db_info, info, list(current.definitions),
                                    added, added, new_table_id, text)

    def remove_partitioning(self, db: str, table: str, query: str | None = None) -> DDLJob:
        """REMOVE PARTITIONING: every row copied into one partition whose id becomes the table's."""
        with self._ddl_lock:
            db_info, info = self._catalog.db(db), self._catalog.table(db, table)
            if info.partition is None:
                raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                                   "Partition management on a not partitioned table is not possible")
            (collapsed_id,) = self._catalog.alloc_ids(1)
            added = PartitionInfo(type=part.NONE, definitions=[part.definition(collapsed_id, "CollapsedPartitions")])
            added.raw = {**added.to_json(), "num": 1}
            text = query or f"ALTER TABLE {q(info.name)} REMOVE PARTITIONING"
            return self._reorganize(ActionType.REMOVE_PARTITIONING, db_info, info, list(info.partition.definitions),
                                    added, None, collapsed_id, text)

    def _reorganize(self, action: ActionType, db_info: Any, info: TableInfo, replaced: list[PartitionDefinition],
                    added: PartitionInfo, final: PartitionInfo | None, new_table_id: int, text: str) -> DDLJob:
        """The five steps of `onReorganizePartition` for all three actions."""
        (job_id,) = self._catalog.alloc_ids(1)
        job = self._job(job_id, action, db_info, info, text)
        args_info = copy.deepcopy(added)
        args_info.raw = {**args_info.to_json(), "new_table_id": new_table_id}
        job.raw_args = [[d.name.lower() for d in replaced], args_info.to_json()]
        source = info.partition if info.partition is not None else _as_none_partitioning(info)
        new_ids = {d.id for d in added.definitions}
        state = {"t": info}

        def staged(ddl_state: int) -> Callable[[KvTxn], None]:
            def apply(txn: KvTxn) -> None:
                t = state["t"]
                p = part.with_definitions(source, list(source.definitions), adding=list(added.definitions),
                                          dropping=list(replaced))
                p.raw = {**p.raw, "ddl_state": ddl_state, "new_table_id": new_table_id, "ddl_type": added.type,
                         "ddl_expr": added.expr, "ddl_columns": [{"O": c, "L": c.lower()} for c in added.columns] or None}
                state["t"] = self._updated(t, txn, partition=p)
                self._catalog.put_table(txn, db_info.id, state["t"])
            return apply

        def copy_rows(txn: KvTxn) -> None:
            t = state["t"]
            target = replace(t, partition=final if final is not None else None)
            for physical, handle, values in rows_of(self._cluster, replace(t, partition=part.with_definitions(
                    source, list(replaced), adding=[], dropping=[])), txn.start_ts):
                stored = {k: v for k, v in values.items() if k != _ROWID}
                destination = part.locate(target, values) if final is not None else added.definitions[0].id
                if destination not in new_ids:
                    raise er.sql_error(er.ROW_DOES_NOT_MATCH_PARTITION, "Found a row that does not match the partition")
                txn.put(record_key(destination, handle), encode_row(t, stored))
            p = part.with_definitions(final if final is not None else added, list((final or added).definitions),
                                      adding=list(added.definitions), dropping=list(replaced))
            p.raw = {**p.raw, "ddl_state": S.DELETE_REORGANIZATION, "new_table_id": new_table_id,
                     "ddl_type": source.type, "ddl_expr": source.expr,
                     "ddl_columns": [{"O": c, "L": c.lower()} for c in source.columns] or None}
            state["t"] = self._updated(t, txn, partition=p)
            self._catalog.put_table(txn, db_info.id, state["t"])

        def finish(txn: KvTxn) -> None:
            t = state["t"]
            if action == ActionType.REORGANIZE_PARTITION:
                state["t"] = self._updated(t, txn, partition=part.with_definitions(final, list(final.definitions),
                                                                                    adding=[], dropping=[]))
                self._catalog.put_table(txn, db_info.id, state["t"])
                return
            base = self._catalog.rowid_bases.get(info.id)
            clean = None if final is None else part.with_definitions(final, list(final.definitions), adding=[],
                                                                     dropping=[])
            moved = self._updated(t, txn, id=new_table_id, partition=clean)
            self._catalog.drop_table(txn, db_info.id, t)
            self._catalog.put_table(txn, db_info.id, moved)
            if base is not None:
                self._catalog.write_rowid_base(txn, db_info.id, new_table_id, base)
            state["t"] = moved

        steps = [Step(S.DELETE_ONLY, staged(S.DELETE_ONLY)), Step(S.WRITE_ONLY, staged(S.WRITE_ONLY)),
                 Step(S.WRITE_REORGANIZATION, staged(S.WRITE_REORGANIZATION)),
                 Step(S.DELETE_REORGANIZATION, copy_rows), Step(S.NONE, finish)]
        split = [d.id for d in added.definitions] + ([new_table_id] if new_table_id else [])
        plan = JobPlan(job, steps, lambda: (None, state["t"]), split_ids=split, rewrites=[info.id],
                       new_table_id=new_table_id, revert=self._reverter(db_info, info))
        return self._run(plan)


def _as_none_partitioning(info: TableInfo) -> PartitionInfo:
    """A non-partitioned table seen as one partition with the table's own id (`getPartitionInfoTypeNone`)."""
    whole = PartitionInfo(type=part.NONE, definitions=[part.definition(info.id, "pFullTable")])
    whole.raw = {**whole.to_json(), "num": 1}
    return whole


def _check_final(info: TableInfo, final: PartitionInfo) -> None:
    """The new partitioning must hold every existing key (1503) and its bounds must be valid."""
    check_partitioning(replace(info, partition=final))
    part.router(replace(info, partition=final))


def _check_same_definition(pt: TableInfo, nt: TableInfo) -> None:
    """pkg/ddl `checkTableDefCompatible`: the same columns and types, the same indexes (1736)."""
    def shape(t: TableInfo) -> tuple:
        columns = tuple((c.name.lower(), c.field_type.tp, c.field_type.flen, c.field_type.decimal,
                         c.field_type.flag & 0x20, c.field_type.charset, c.field_type.collate, tuple(c.field_type.elems or ()))
                        for c in t.public_columns())
        indexes = tuple(sorted((i.name.lower(), i.unique, i.primary, tuple(c.name.lower() for c in i.columns))
                               for i in t.indices))
        return columns, indexes, t.pk_is_handle, t.is_common_handle
    if shape(pt) != shape(nt):
        raise er.sql_error(er.TABLES_DIFFERENT_METADATA, "Tables have different definitions")


def _check_rows_fit(cluster: Any, pt: TableInfo, defn: PartitionDefinition, nt: TableInfo, ts: int) -> None:
    """WITH VALIDATION: every row of the table must belong in the partition it joins (1737)."""
    for _physical, _handle, values in rows_of(cluster, nt, ts):
        try:
            located = part.locate(pt, values)
        except er.SqlError:
            located = None
        if located != defn.id:
            raise er.sql_error(er.ROW_DOES_NOT_MATCH_PARTITION, "Found a row that does not match the partition")
