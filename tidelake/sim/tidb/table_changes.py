"""ALTER TABLE changes as TiDB's DDL worker runs them: an action, its job args, its schema-state steps.

A TableChange is planned against the table as it is before the change; the DDL executor runs its
steps, one transaction each (tidelake/sim/tidb/ddl.py), alone as one job or as a sub-job of a
multi-schema change. State sequences and job args are those of pingcap/tidb pkg/ddl (`onAddColumn`,
`onDropColumn`, `onModifyColumn`, `onSetDefaultValue`, `onCreateIndex`, `onDropIndex`,
`onRenameIndex`, `onAddTablePartition`, `onDropTablePartition`, `onTruncateTablePartition`,
`onModifyTableComment`, `onRebaseAutoIncrementIDType`) with job version 1 (raw_args a JSON list).
Steps that rewrite rows (MODIFY COLUMN to another storage type, a unique index check) read and
write them inside the step's transaction.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType, SchemaState
from tidelake.codec.keys import decode_record_key, record_key, table_record_span
from tidelake.codec.row import decode_row, encode_row
from tidelake.codec.row_value import zero_value
from tidelake.codec.schema import STATE_PUBLIC, ColumnInfo, IndexInfo, TableInfo
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import Mode, duration_text, to_column, value_text
from tidelake.sim.tidb.kvtxn import KvTxn, snapshot_scan
from tidelake.sim.tidb.show_create import column_sql, q, type_sql
from tidelake.sim.tidb.table_spec import IndexSpec, add_index_info, check_partitioning, renumber
from tidelake.sim.tidb.types import CURRENT_TIMESTAMP, ColumnDef, build_column, default_json

S = SchemaState
Transition = Callable[[TableInfo, KvTxn], TableInfo]
# Storage-compatible changes need no row rewrite (pkg/ddl `needChangeColumnData` is false)
_INT_RANK = [mt.TYPE_TINY, mt.TYPE_SHORT, mt.TYPE_INT24, mt.TYPE_LONG, mt.TYPE_LONGLONG]


@dataclass
class TableChange:
    """One ALTER TABLE action: what it writes into the job and the steps that run it."""

    action: ActionType
    raw_args: list
    steps: list[tuple[int, Transition]]
    query: str
    split_ids: list[int] = field(default_factory=list)
    rewrites_rows: bool = False

    def apply_all(self, info: TableInfo, txn: KvTxn | None = None) -> TableInfo:
        """The table after every step (planning the next change of a multi-schema change)."""
        for _, step in self.steps:
            info = step(info, txn) if txn is not None else _dry(step, info)
        return info


def _dry(step: Transition, info: TableInfo) -> TableInfo:
    return step(copy.deepcopy(info), None)  # type: ignore[arg-type]  # a dry run writes no rows


def _cistr(name: str) -> dict:
    return {"O": name, "L": name.lower()}


def _position_json(position: Any) -> dict:
    """ast.ColumnPosition: Tp 0 none, 1 first, 2 after RelativeColumn."""
    if position is None:
        return {"Tp": 0, "RelativeColumn": None}
    if position == "FIRST":
        return {"Tp": 1, "RelativeColumn": None}
    return {"Tp": 2, "RelativeColumn": {"Schema": _cistr(""), "Table": _cistr(""), "Name": _cistr(position[1])}}


def _place(columns: list[ColumnInfo], column_id: int, position: Any) -> list[ColumnInfo]:
    """`columns` with `column_id` moved to FIRST / AFTER x (None keeps it where it is)."""
    if position is None:
        return columns
    moving = next(c for c in columns if c.id == column_id)
    rest = [c for c in columns if c.id != column_id]
    if position == "FIRST":
        return [moving] + rest
    after = position[1].lower()
    index = next((i for i, c in enumerate(rest) if c.name.lower() == after), None)
    if index is None:
        raise er.bad_field(position[1], "table")
    return rest[: index + 1] + [moving] + rest[index + 1:]


def _check_position(info: TableInfo, position: Any) -> None:
    if isinstance(position, tuple) and info.column_by_name(position[1]) is None:
        raise er.sql_error(er.BAD_FIELD, f"Unknown column '{position[1]}' in '{info.name}'")


def column_of(info: TableInfo, name: str) -> ColumnInfo:
    col = info.column_by_name(name)
    if col is None or col.state != STATE_PUBLIC:
        raise er.sql_error(er.BAD_FIELD, f"Unknown column '{name}' in '{info.name}'")
    return col


def rows_of(cluster: Any, info: TableInfo, ts: int) -> list[tuple[int, int | bytes, dict]]:
    """(physical id, handle, values) of every row of `info` at `ts`."""
    out = []
    for physical in info.physical_ids():
        for key, value in snapshot_scan(cluster, *table_record_span(physical), ts):
            handle = decode_record_key(key)[1]
            out.append((physical, handle, decode_row(value, info, handle)))
    return out


# ---- columns ---------------------------------------------------------------------------------------


def origin_default_text(col: ColumnInfo, now: datetime) -> Any:
    """What rows written before ADD COLUMN read: the DEFAULT, CURRENT_TIMESTAMP as the DDL's time, else
    the type's zero value for NOT NULL columns (pkg/ddl `generateOriginDefaultValue`)."""
    if isinstance(col.default, str) and col.default.upper().startswith(CURRENT_TIMESTAMP):
        fsp = max(col.field_type.decimal, 0)
        moment = now.astimezone(timezone.utc) if col.field_type.tp == mt.TYPE_TIMESTAMP else now
        text = moment.strftime("%Y-%m-%d %H:%M:%S")
        return text + (f".{moment.microsecond:06d}"[: fsp + 1] if fsp else "")
    if col.default is not None or col.default_bit is not None:
        return col.default
    if mt.is_not_null(col.field_type.flag):
        zero = zero_value(col.field_type)
        if col.field_type.tp == mt.TYPE_DURATION:
            return duration_text(zero, 0)
        return default_json(zero, col.field_type) if not isinstance(zero, (bytes, bytearray)) else zero.decode()
    return None


def add_column(info: TableInfo, defn: ColumnDef, position: Any = None, now: datetime | None = None) -> TableChange:
    """Rows written before keep their encoding; readers fill `origin_default`
    (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)."""
    if defn.primary_key:
        raise er.unsupported_ddl("add column with primary key flag")
    if defn.auto_increment:
        raise er.unsupported_ddl("add column with auto_increment when altering")
    if defn.generated and defn.generated_stored:
        raise er.sql_error(er.UNSUPPORTED_DDL, "'Adding generated stored column through ALTER TABLE' is not "
                                               "supported for generated columns.")
    if info.column_by_name(defn.name) is not None:
        raise er.sql_error(er.DUP_FIELDNAME, f"Duplicate column name '{defn.name}'")
    _check_position(info, position)
    col = build_column(defn, info.max_col_id + 1, len(info.columns))
    col.origin_default = origin_default_text(col, now or datetime.now())
    col.origin_default_bit = col.default_bit
    offset = len(info.columns) if position is None else _place(info.columns + [col], col.id, position).index(col)

    def with_column(state: int) -> Transition:
        def step(t: TableInfo, _txn: KvTxn) -> TableInfo:
            cols = [c for c in t.columns if c.id != col.id] + [replace(copy.deepcopy(col), state=state)]
            if state == S.PUBLIC:
                cols = _place(cols, col.id, position)
            return renumber(replace(t, columns=cols, max_col_id=max(t.max_col_id, col.id)))
        return step

    states = (S.DELETE_ONLY, S.WRITE_ONLY, S.WRITE_REORGANIZATION, S.PUBLIC)
    return TableChange(ActionType.ADD_COLUMN, [col.to_json(), _position_json(position), offset, False],
                       [(s, with_column(s)) for s in states], f"ADD COLUMN {column_sql(col)}")


def drop_column(info: TableInfo, name: str) -> TableChange:
    """Single-column indexes over the column go with it (pkg/ddl `onDropColumn`); a key the table is
    clustered on, a composite index or the partitioning cannot lose it."""
    col = column_of(info, name)
    if col.field_type.flag & mt.PRI_KEY_FLAG and (info.pk_is_handle or info.is_common_handle):
        raise er.unsupported_ddl("drop integer primary key" if info.pk_is_handle else
                                 "drop column with primary key covered now")
    composite = [idx for idx in info.indices if len(idx.columns) > 1
                 and any(ic.name.lower() == name.lower() for ic in idx.columns)]
    if composite:
        raise er.unsupported_ddl(f"drop column {col.name} with composite index covered or Primary Key covered now")
    if name.lower() in {c.lower() for c in part.partition_columns(info)}:
        raise er.unsupported_ddl(f"drop column {col.name}: it is used by the partitioning")
    if len([c for c in info.columns if c.state == STATE_PUBLIC]) == 1:
        raise er.sql_error(er.CANT_DROP_FIELD_OR_KEY, "You can't delete all columns with ALTER TABLE; use DROP TABLE "
                                                      "instead")
    dropped_indexes = [idx.id for idx in info.indices if any(ic.name.lower() == name.lower() for ic in idx.columns)]

    def with_state(state: int) -> Transition:
        def step(t: TableInfo, _txn: KvTxn) -> TableInfo:
            if state == S.NONE:
                kept = [c for c in t.columns if c.id != col.id]
                return renumber(replace(t, columns=kept, indices=[i for i in t.indices if i.id not in dropped_indexes]))
            cols = [replace(c, state=state) if c.id == col.id else c for c in t.columns]
            indices = [replace(i, state=state) if i.id in dropped_indexes else i for i in t.indices]
            return replace(t, columns=cols, indices=indices)
        return step

    states = (S.WRITE_ONLY, S.DELETE_ONLY, S.DELETE_REORGANIZATION, S.NONE)
    return TableChange(ActionType.DROP_COLUMN, [_cistr(col.name), False, dropped_indexes],
                       [(s, with_state(s)) for s in states], f"DROP COLUMN {q(col.name)}")


def needs_row_change(old: Any, new: Any) -> bool:
    """pkg/ddl `needChangeColumnData`: another storage type, a narrower one, another charset."""
    if old.tp in mt.INTEGER_TYPES and new.tp in mt.INTEGER_TYPES:
        same_sign = (old.flag & mt.UNSIGNED_FLAG) == (new.flag & mt.UNSIGNED_FLAG)
        return not (same_sign and _INT_RANK.index(new.tp) >= _INT_RANK.index(old.tp))
    if old.tp in (mt.TYPE_VARCHAR, mt.TYPE_STRING) and new.tp in (mt.TYPE_VARCHAR, mt.TYPE_STRING) and \
            old.tp == new.tp:
        return new.flen < old.flen or (old.charset, old.collate) != (new.charset, new.collate)
    if old.tp in mt.BLOB_TYPES and new.tp in mt.BLOB_TYPES:
        return (new.flen < old.flen) or mt.is_binary_string(old) != mt.is_binary_string(new)
    if old.tp in (mt.TYPE_ENUM, mt.TYPE_SET) and old.tp == new.tp:
        return list(new.elems or [])[: len(old.elems or [])] != list(old.elems or [])
    return (old.tp, old.flen, old.decimal, old.charset, old.flag & mt.UNSIGNED_FLAG) != \
        (new.tp, new.flen, new.decimal, new.charset, new.flag & mt.UNSIGNED_FLAG)


def modify_column(info: TableInfo, name: str, defn: ColumnDef, position: Any = None, mode: Mode | None = None,
                  cluster: Any = None) -> TableChange:
    """MODIFY/CHANGE COLUMN (and RENAME COLUMN): ActionModifyColumn (12). A storage-compatible change
    is one public step; otherwise TiDB adds a changing column with a new id, rewrites every row into
    it (write-reorg) and swaps it in (pkg/ddl `onModifyColumn`, `doModifyColumnTypeWithData`)."""
    old = column_of(info, name)
    if defn.name.lower() != old.name.lower() and info.column_by_name(defn.name) is not None:
        raise er.sql_error(er.DUP_FIELDNAME, f"Duplicate column name '{defn.name}'")
    if defn.primary_key:
        raise er.unsupported_ddl("modify column with primary key flag")
    _check_position(info, position)
    keep = mt.PRI_KEY_FLAG | mt.UNIQUE_KEY_FLAG | mt.MULTIPLE_KEY_FLAG | mt.AUTO_INCREMENT_FLAG
    new = build_column(defn, old.id, old.offset)
    new.field_type.flag |= old.field_type.flag & keep
    if old.field_type.flag & mt.PRI_KEY_FLAG:
        new.field_type.flag |= mt.NOT_NULL_FLAG
    new.origin_default, new.origin_default_bit = old.origin_default, old.origin_default_bit
    new.generated_expr_string, new.generated_stored = defn.generated or old.generated_expr_string, \
        defn.generated_stored if defn.generated else old.generated_stored
    if old.is_generated != bool(new.generated_expr_string):
        raise er.sql_error(er.UNSUPPORTED_DDL, "'modifying a generated column' is not supported for generated columns.")
    key_column = any(ic.name.lower() == name.lower() for idx in info.indices for ic in idx.columns) or \
        old.field_type.flag & mt.PRI_KEY_FLAG
    reorg = needs_row_change(old.field_type, new.field_type)
    if reorg and (key_column or info.pk_is_handle and old.field_type.flag & mt.PRI_KEY_FLAG):
        raise er.unsupported_ddl("modify column the type of a key column (the simulator rewrites no index)")
    if reorg and name.lower() in {c.lower() for c in part.partition_columns(info)}:
        raise er.unsupported_ddl("modify column type of a partitioning column")
    tightens = mt.is_not_null(new.field_type.flag) and not mt.is_not_null(old.field_type.flag)
    args = [new.to_json(), _cistr(old.name), _position_json(position), 0, 0]
    query = f"CHANGE COLUMN {q(old.name)} {column_sql(new)}"
    if not reorg and not tightens:
        def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
            cols = _place([copy.deepcopy(new) if c.id == old.id else c for c in t.columns], old.id, position)
            return _renamed_in_keys(renumber(replace(t, columns=cols)), old.name, new.name)
        return TableChange(ActionType.MODIFY_COLUMN, args, [(S.PUBLIC, public)], query)
    changing = copy.deepcopy(new)
    changing.id = info.max_col_id + 1
    changing.name = f"_Col$_{old.name}_0"
    changing.hidden = True

    def add_changing(state: int) -> Transition:
        def step(t: TableInfo, _txn: KvTxn) -> TableInfo:
            cols = [c for c in t.columns if c.id != changing.id] + [replace(copy.deepcopy(changing), state=state)]
            return renumber(replace(t, columns=cols, max_col_id=max(t.max_col_id, changing.id)))
        return step

    def rewrite(t: TableInfo, txn: KvTxn) -> TableInfo:
        staged = add_changing(S.WRITE_REORGANIZATION)(t, txn)
        if txn is None:
            return staged
        for physical, handle, values in rows_of(cluster, t, txn.start_ts):
            out = with_changing_values(staged, values, mode or Mode())
            out.pop("_tidb_rowid", None)
            txn.put(record_key(physical, handle), encode_row(writable(staged), out))
        return staged

    def swap(t: TableInfo, _txn: KvTxn) -> TableInfo:
        final = replace(copy.deepcopy(changing), name=new.name, hidden=False, offset=old.offset, state=S.PUBLIC)
        cols = [final if c.id == old.id else c for c in t.columns if c.id != changing.id]
        cols = _place(cols, final.id, position)
        return _renamed_in_keys(renumber(replace(t, columns=cols)), old.name, new.name)

    steps = [(S.DELETE_ONLY, add_changing(S.DELETE_ONLY)), (S.WRITE_ONLY, add_changing(S.WRITE_ONLY)),
             (S.WRITE_REORGANIZATION, rewrite), (S.PUBLIC, swap)]
    return TableChange(ActionType.MODIFY_COLUMN, args, steps, query, rewrites_rows=True)


CHANGING_PREFIX = "_Col$_"


def _changing_columns(info: TableInfo) -> list[tuple[ColumnInfo, ColumnInfo]]:
    """(changing column, the column it replaces) of a MODIFY COLUMN in progress."""
    out = []
    for col in info.columns:
        if col.hidden and col.name.startswith(CHANGING_PREFIX) and col.name.endswith("_0"):
            source = info.column_by_name(col.name[len(CHANGING_PREFIX):-2])
            if source is not None:
                out.append((col, source))
    return out


def with_changing_values(info: TableInfo, values: dict, mode: Mode) -> dict:
    """A row's values plus its changing columns' (the source value converted), as TiDB writes both
    while a MODIFY COLUMN reorganises the table (1138 for a NULL into NOT NULL)."""
    out = dict(values)
    for changing, source in _changing_columns(info):
        value = values.get(source.name)
        converted = None if value is None else to_column(value, replace(changing, name=source.name), mode)
        if converted is None and mt.is_not_null(changing.field_type.flag):
            raise er.sql_error((1138, "22004"), "Invalid use of NULL value")
        out[changing.name] = converted
    return out


def writable(info: TableInfo) -> TableInfo:
    """`info` with its changing columns public, so a row's encoding carries their values (codec's
    encode_row gives non-public columns their origin default)."""
    changing = {c.id for c, _ in _changing_columns(info)}
    if not changing:
        return info
    return replace(info, columns=[replace(c, state=STATE_PUBLIC) if c.id in changing else c for c in info.columns])


def _renamed_in_keys(info: TableInfo, old: str, new: str) -> TableInfo:
    if old.lower() == new.lower() and old == new:
        return info
    indices = [replace(idx, columns=[replace(ic, name=new) if ic.name.lower() == old.lower() else ic
                                     for ic in idx.columns]) for idx in info.indices]
    partition = info.partition
    if partition is not None:
        partition = copy.deepcopy(partition)
        partition.columns = [new if c.lower() == old.lower() else c for c in partition.columns]
        if partition.expr == part.quote(old):
            partition.expr = part.quote(new)
    return replace(info, indices=indices, partition=partition)


def rename_column(info: TableInfo, name: str, new_name: str) -> TableChange:
    """RENAME COLUMN is ActionModifyColumn (12) in TiDB; no separate code (docs/wire.md#actiontype-codes)."""
    col = column_of(info, name)
    defn = _column_def_of(col, new_name)
    change = modify_column(info, name, defn)
    change.query = f"RENAME COLUMN {q(col.name)} TO {q(new_name)}"
    return change


def _column_def_of(col: ColumnInfo, name: str) -> ColumnDef:
    """A ColumnDef that rebuilds `col` exactly (for a rename)."""
    ft = col.field_type
    text = type_sql(col).replace(" zerofill", "")
    string_like = ft.tp in mt.STRING_TYPES | {mt.TYPE_ENUM, mt.TYPE_SET} and not mt.is_binary_string(ft)
    return ColumnDef(name=name, type=text, nullable=not mt.is_not_null(ft.flag),
                     default=col.default, comment=col.comment, charset=ft.charset if string_like else None,
                     collate=ft.collate if string_like else None, generated=col.generated_expr_string,
                     generated_stored=col.generated_stored, on_update_now=bool(ft.flag & mt.ON_UPDATE_NOW_FLAG),
                     auto_increment=bool(ft.flag & mt.AUTO_INCREMENT_FLAG))


def set_default(info: TableInfo, name: str, default: Any, drop: bool = False) -> TableChange:
    """ALTER COLUMN SET DEFAULT / DROP DEFAULT: ActionSetDefaultValue (15), one public step."""
    col = column_of(info, name)
    changed = copy.deepcopy(col)
    if drop:
        changed.default = None
        changed.field_type.flag |= mt.NO_DEFAULT_VALUE_FLAG
    else:
        changed.default = default if isinstance(default, str) and default.upper().startswith(CURRENT_TIMESTAMP) \
            else default_json(default, col.field_type)
        changed.field_type.flag &= ~mt.NO_DEFAULT_VALUE_FLAG

    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, columns=[copy.deepcopy(changed) if c.id == col.id else c for c in t.columns])

    text = "DROP DEFAULT" if drop else f"SET DEFAULT {value_text(default)!r}"
    return TableChange(ActionType.SET_DEFAULT_VALUE, [changed.to_json()], [(S.PUBLIC, public)],
                       f"ALTER COLUMN {q(col.name)} {text}")


# ---- indexes -----------------------------------------------------------------------------------------


def add_index(info: TableInfo, spec: IndexSpec, cluster: Any = None) -> TableChange:
    """ADD [UNIQUE] INDEX / ADD PRIMARY KEY (always NONCLUSTERED in TiDB: pkg/ddl `CreatePrimaryKey`).
    A unique index is checked over the existing rows at write-reorg (1062 when they clash)."""
    if spec.primary and (info.pk_is_handle or info.primary_index() is not None):
        raise er.sql_error(er.MULTIPLE_PRI_KEY, "Multiple primary key defined")
    staged = copy.deepcopy(info)
    index = add_index_info(staged, spec)
    if spec.primary:
        for ic in index.columns:
            col = info.column_by_name(ic.name)
            if col.is_generated and not col.generated_stored:
                raise er.sql_error(er.UNSUPPORTED_DDL, "'Defining a virtual generated column as primary key' is not "
                                                       "supported for generated columns.")
    if index.unique and info.partition is not None:
        check_partitioning(staged)  # the CREATE TABLE rule, on the new key
    action = ActionType.ADD_PRIMARY_KEY if spec.primary else ActionType.ADD_INDEX
    parts = [{"Column": {"Name": _cistr(ic.name)}, "Length": ic.length} for ic in index.columns]

    def with_index(state: int) -> Transition:
        def step(t: TableInfo, txn: KvTxn) -> TableInfo:
            if state == S.WRITE_REORGANIZATION and index.unique and txn is not None:
                _check_unique(cluster, t, index, txn.start_ts)
            indices = [i for i in t.indices if i.id != index.id] + [replace(copy.deepcopy(index), state=state)]
            out = replace(t, indices=indices, max_idx_id=max(t.max_idx_id, index.id))
            if state == S.PUBLIC:
                out = _flag_index(out, index)
            return out
        return step

    states = (S.DELETE_ONLY, S.WRITE_ONLY, S.WRITE_REORGANIZATION, S.PUBLIC)
    kind = "PRIMARY KEY" if spec.primary else ("UNIQUE INDEX" if spec.unique else "INDEX")
    cols = ", ".join(q(ic.name) + (f"({ic.length})" if ic.length > 0 else "") for ic in index.columns)
    query = f"ADD {kind} {'' if spec.primary else q(index.name)}({cols})"
    return TableChange(action, [index.unique, _cistr(index.name), parts, None, [], False],
                       [(s, with_index(s)) for s in states], query)


def _flag_index(info: TableInfo, index: IndexInfo) -> TableInfo:
    """The key flags a new index gives its columns (see table_spec `_flag_key_columns`)."""
    first = index.columns[0].name.lower()
    members = {ic.name.lower() for ic in index.columns}
    cols = []
    for c in info.columns:
        if c.name.lower() == first or (index.primary and c.name.lower() in members):
            c = copy.deepcopy(c)
            if index.primary:
                c.field_type.flag |= mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG
            elif index.unique and len(index.columns) == 1:
                c.field_type.flag |= mt.UNIQUE_KEY_FLAG
            else:
                c.field_type.flag |= mt.MULTIPLE_KEY_FLAG
        cols.append(c)
    return replace(info, columns=cols)


def _check_unique(cluster: Any, info: TableInfo, index: IndexInfo, ts: int) -> None:
    seen: dict[tuple, Any] = {}
    for _physical, _handle, values in rows_of(cluster, info, ts):
        key = tuple(unique_value(values.get(ic.name), info.column_by_name(ic.name), ic.length) for ic in index.columns)
        if any(k is None for k in key):
            if index.primary:
                raise er.sql_error((1138, "22004"), "Invalid use of NULL value")
            continue
        if key in seen:
            shown = "-".join(value_text(values.get(ic.name)) for ic in index.columns)
            raise er.duplicate_entry(shown, f"{info.name}.{index.name}")
        seen[key] = True


def unique_value(value: Any, column: ColumnInfo, length: int = -1) -> Any:
    """A value as a unique index compares it: prefixes cut, PAD SPACE, `_ci` collations case-folded."""
    if value is None:
        return None
    if isinstance(value, str):
        if length > 0:
            value = value[:length]
        value = value.rstrip(" ")
        if column.field_type.collate.endswith("_ci"):
            value = value.casefold()
    elif isinstance(value, (bytes, bytearray)) and length > 0:
        value = bytes(value)[:length]
    return value


def drop_index(info: TableInfo, name: str) -> TableChange:
    """DROP INDEX / DROP PRIMARY KEY (a clustered key cannot go: pkg/ddl `checkIsDropPrimaryKey`)."""
    primary = name.upper() == "PRIMARY"
    if primary and (info.pk_is_handle or info.is_common_handle):
        raise er.unsupported_ddl("drop primary key when the table is using clustered index")
    index = next((i for i in info.indices if i.name.lower() == name.lower()), None)
    if index is None:
        raise er.sql_error(er.CANT_DROP_FIELD_OR_KEY, f"Can't DROP '{name}'; check that column/key exists")
    action = ActionType.DROP_PRIMARY_KEY if index.primary else ActionType.DROP_INDEX

    def with_state(state: int) -> Transition:
        def step(t: TableInfo, _txn: KvTxn) -> TableInfo:
            if state == S.NONE:
                return replace(t, indices=[i for i in t.indices if i.id != index.id])
            return replace(t, indices=[replace(i, state=state) if i.id == index.id else i for i in t.indices])
        return step

    states = (S.WRITE_ONLY, S.DELETE_ONLY, S.DELETE_REORGANIZATION, S.NONE)
    query = "DROP PRIMARY KEY" if index.primary else f"DROP INDEX {q(index.name)}"
    return TableChange(action, [_cistr(index.name), False, index.id], [(s, with_state(s)) for s in states], query)


def rename_index(info: TableInfo, name: str, new_name: str) -> TableChange:
    index = next((i for i in info.indices if i.name.lower() == name.lower()), None)
    if index is None:
        raise er.sql_error((1176, "42000"), f"Key '{name}' doesn't exist in table '{info.name}'")
    if any(i.name.lower() == new_name.lower() for i in info.indices if i.id != index.id):
        raise er.sql_error(er.DUP_KEYNAME, f"Duplicate key name '{new_name}'")

    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, indices=[replace(i, name=new_name) if i.id == index.id else i for i in t.indices])

    return TableChange(ActionType.RENAME_INDEX, [_cistr(index.name), _cistr(new_name)], [(S.PUBLIC, public)],
                       f"RENAME INDEX {q(index.name)} TO {q(new_name)}")


def index_visibility(info: TableInfo, name: str, invisible: bool) -> TableChange:
    index = next((i for i in info.indices if i.name.lower() == name.lower()), None)
    if index is None:
        raise er.sql_error((1176, "42000"), f"Key '{name}' doesn't exist in table '{info.name}'")

    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, indices=[replace(i, invisible=invisible) if i.id == index.id else i for i in t.indices])

    return TableChange(ActionType.ALTER_INDEX_VISIBILITY, [_cistr(index.name), invisible], [(S.PUBLIC, public)],
                       f"ALTER INDEX {q(index.name)} {'INVISIBLE' if invisible else 'VISIBLE'}")


# ---- table options -------------------------------------------------------------------------------


def table_comment(info: TableInfo, comment: str) -> TableChange:
    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, comment=comment)

    return TableChange(ActionType.MODIFY_TABLE_COMMENT, [comment], [(S.PUBLIC, public)], f"COMMENT = {comment!r}")


def table_charset(info: TableInfo, charset: str, collate: str) -> TableChange:
    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, charset=charset, collate=collate)

    return TableChange(ActionType.MODIFY_TABLE_CHARSET_AND_COLLATE, [charset, collate, False], [(S.PUBLIC, public)],
                       f"CHARACTER SET = {charset} COLLATE = {collate}")


def rebase_auto_id(info: TableInfo, base: int, random: bool = False) -> TableChange:
    """AUTO_INCREMENT = n / AUTO_RANDOM_BASE = n: the allocator moves; the TableInfo notes the base."""
    key = "auto_rand_id" if random else "auto_inc_id"

    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, raw={**(t.raw or {}), key: base})

    action = ActionType.REBASE_AUTO_RANDOM_BASE if random else ActionType.REBASE_AUTO_ID
    option = "AUTO_RANDOM_BASE" if random else "AUTO_INCREMENT"
    return TableChange(action, [base, False], [(S.PUBLIC, public)], f"{option} = {base}")


# ---- partitions (ADD / DROP / TRUNCATE) ------------------------------------------------------------


def _need_partitioned(info: TableInfo, kinds: Sequence[int] | None = None) -> Any:
    if info.partition is None:
        raise er.sql_error(er.PARTITION_MGMT_ON_NONPARTITIONED,
                           "Partition management on a not partitioned table is not possible")
    if kinds is not None and info.partition.type not in kinds:
        raise er.unsupported_ddl(f"this operation on {part.partition_type_name(info.partition)} partitioning")
    return info.partition


def definition_of(info: TableInfo, name: str, what: str) -> Any:
    defn = next((d for d in info.partition.definitions if d.name.lower() == name.lower()), None)
    if defn is None:
        raise er.sql_error(er.DROP_PARTITION_NON_EXISTENT, f"Error in list of partitions to {what}")
    return defn


def add_partitions(info: TableInfo, definitions: Sequence[tuple[str, Any]], ids: Sequence[int]) -> TableChange:
    """RANGE/LIST: none -> replica-only (adding_definitions) -> public (pkg/ddl `onAddTablePartition`)."""
    pinfo = _need_partitioned(info, (part.RANGE, part.LIST))
    if pinfo.type == part.RANGE:
        new_defs = [part.definition(pid, name, less_than=list(bound)) for pid, (name, bound) in zip(ids, definitions)]
    else:
        new_defs = [part.definition(pid, name, in_values=groups) for pid, (name, groups) in zip(ids, definitions)]
    part.check_unique_names([d.name for d in pinfo.definitions] + [d.name for d in new_defs])
    probe = replace(info, partition=part.with_definitions(pinfo, list(pinfo.definitions) + new_defs))
    _check_bounds(probe)

    def adding(t: TableInfo, _txn: KvTxn) -> TableInfo:
        p = t.partition
        return replace(t, partition=part.with_definitions(p, list(p.definitions), adding=new_defs))

    def public(t: TableInfo, _txn: KvTxn) -> TableInfo:
        p = t.partition
        return replace(t, partition=part.with_definitions(p, list(p.definitions) + new_defs, adding=[]))

    raw = part.with_definitions(pinfo, new_defs).to_json()
    names = ", ".join(f"PARTITION {q(d.name)}" for d in new_defs)
    return TableChange(ActionType.ADD_TABLE_PARTITION, [raw], [(S.REPLICA_ONLY, adding), (S.PUBLIC, public)],
                       f"ADD PARTITION ({names})", split_ids=list(ids))


def _check_bounds(info: TableInfo) -> None:
    """RANGE bounds strictly increase; a LIST value appears once (evaluated as the router does)."""
    router = part.router(info)
    if info.partition.type == part.RANGE:
        for previous, bound in zip(router.bounds, router.bounds[1:]):
            if not part.bound_below(previous, bound):
                raise er.sql_error(er.RANGE_NOT_INCREASING,
                                   "VALUES LESS THAN value must be strictly increasing for each partition")
        return
    seen: list[list[Any]] = []
    for groups in router.values:
        for group in groups:
            if any(part.same_values(group, other) for other in seen):
                raise er.sql_error((1495, "HY000"), "Multiple definition of same constant in list partitioning")
            seen.append(group)


def drop_partitions(info: TableInfo, names: Sequence[str]) -> TableChange:
    """public -> delete-only (dropping_definitions) -> delete-reorg -> none (pkg/ddl `onDropTablePartition`)."""
    pinfo = _need_partitioned(info, (part.RANGE, part.LIST))
    dropped = [definition_of(info, n, "DROP") for n in names]
    if len(dropped) >= len(pinfo.definitions):
        raise er.sql_error(er.DROP_LAST_PARTITION, "Cannot remove all partitions, use DROP TABLE instead")
    ids = {d.id for d in dropped}

    def dropping(t: TableInfo, _txn: KvTxn) -> TableInfo:
        p = t.partition
        kept = [d for d in p.definitions if d.id not in ids]
        return replace(t, partition=part.with_definitions(p, kept, dropping=dropped))

    def done(t: TableInfo, _txn: KvTxn) -> TableInfo:
        return replace(t, partition=part.with_definitions(t.partition, list(t.partition.definitions), dropping=[]))

    steps = [(S.DELETE_ONLY, dropping), (S.DELETE_REORGANIZATION, lambda t, _txn: t), (S.NONE, done)]
    return TableChange(ActionType.DROP_TABLE_PARTITION, [[d.name for d in dropped]], steps,
                       "DROP PARTITION " + ", ".join(q(d.name) for d in dropped))


def truncate_partitions(info: TableInfo, names: Sequence[str], new_ids: Sequence[int]) -> TableChange:
    """Each named partition gets a new physical id; its old rows stay behind the old id."""
    _need_partitioned(info)
    old = [definition_of(info, n, "TRUNCATE") for n in names]
    mapping = {d.id: pid for d, pid in zip(old, new_ids)}

    def truncate(t: TableInfo, _txn: KvTxn) -> TableInfo:
        p = t.partition
        defs = [replace(d, id=mapping[d.id], raw={**d.raw, "id": mapping[d.id]}) if d.id in mapping else d
                for d in p.definitions]
        return replace(t, partition=part.with_definitions(p, defs))

    return TableChange(ActionType.TRUNCATE_TABLE_PARTITION, [[d.id for d in old], list(new_ids)],
                       [(S.PUBLIC, truncate)], "TRUNCATE PARTITION " + ", ".join(q(d.name) for d in old),
                       split_ids=list(new_ids))
