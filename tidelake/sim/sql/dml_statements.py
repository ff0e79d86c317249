"""INSERT, REPLACE, UPDATE and DELETE translated onto the front's transactions (tidelake/sim/tidb/dml.py).

Values are evaluated with MySQL's semantics and converted to each column's type under the
session's sql_mode (errors 1264, 1366, 1406, 1292... name the column and row). Affected rows count
as MySQL counts them: an INSERT ... ON DUPLICATE KEY UPDATE that changes a row counts 2, REPLACE
counts the rows it deleted too, an UPDATE only rows whose values changed. UPDATE and DELETE read
their rows (tidelake/sim/sql/rows.py), then lock each at its latest version; a row that changed
since the read restarts the statement at a newer read ts, as TiDB's pessimistic statement retry
does. A statement is all or nothing (SessionState.statement).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tidelake.codec.row import EXTRA_HANDLE_NAME
from tidelake.codec.schema import ColumnInfo, TableInfo
from tidelake.sim.sql import rows as rs
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.select import run_select
from tidelake.sim.sql.state import SessionState, state_variable, table_name
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import to_column
from tidelake.sim.tidb.dml import RowRef, Txn, column_default
from tidelake.sim.tidb.expr import Compiled

_MAX_RETRIES = 10


def _is_default(node: exp.Expr) -> bool:
    return (isinstance(node, exp.Var) and node.name.upper() == "DEFAULT") or \
        (isinstance(node, exp.Column) and not node.table and node.name.upper() == "DEFAULT" and not node.this.quoted)


def _target(node: exp.Expr, state: SessionState) -> tuple[str, str, list[str] | None]:
    if isinstance(node, exp.Schema):
        db, table = table_name(node.this, state)
        return db, table, [c.name for c in node.expressions]
    db, table = table_name(node, state)
    return db, table, None


def execute_insert(node: exp.Insert, state: SessionState, replace: bool = False) -> Result:
    db, table, names = _target(node.this, state)
    source = node.args.get("expression")
    conflict = node.args.get("conflict")
    ignore = bool(node.args.get("ignore"))
    with state.statement() as txn:
        db_id, info = txn.table(db, table)
        columns = _insert_columns(info, names)
        rows = _source_rows(source, columns, state, txn)
        affected = warnings = 0
        for number, row in enumerate(rows, 1):
            values = _row_values(info, columns, row, number, state, txn)
            done, skipped = _insert_one(txn, db_id, info, values, replace, ignore, conflict, state, number)
            affected += done
            warnings += skipped
        state.last_insert_id = txn.last_insert_id or state.last_insert_id
        return Result(affected=affected, last_insert_id=txn.last_insert_id, warnings=warnings)


def _insert_columns(info: TableInfo, names: list[str] | None) -> list[ColumnInfo]:
    """The columns an INSERT names (all public ones when it names none); 1054 for an unknown one."""
    if names is None:
        return info.public_columns()
    out = []
    for name in names:
        column = info.column_by_name(name)
        if column is None or column.state != 5:
            raise er.bad_field(name, "field list")
        out.append(column)
    return out


def _source_rows(source: exp.Expr, columns: list[ColumnInfo], state: SessionState, txn: Txn) -> list[list[Any]]:
    """Each row as a list of expressions (VALUES) or of values (INSERT ... SELECT)."""
    if isinstance(source, exp.Values):
        out = []
        for number, row in enumerate(source.expressions, 1):
            items = row.expressions if isinstance(row, exp.Tuple) else [row]
            if len(items) != len(columns) and not (not items and columns):
                raise er.sql_error(er.WRONG_VALUE_COUNT, f"Column count doesn't match value count at row {number}")
            out.append(items)
        return out
    if isinstance(source, (exp.Select, exp.Union)):
        result = run_select(source, state, txn)
        if result.rows and len(result.rows[0]) != len(columns):
            raise er.sql_error(er.WRONG_VALUE_COUNT, "Column count doesn't match value count at row 1")
        return [[_Value(v) for v in row] for row in result.rows]
    raise er.not_supported(f"INSERT source {source.sql() if source is not None else 'none'}")


class _Value:
    """A value an INSERT ... SELECT already has (no expression to evaluate)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _row_values(info: TableInfo, columns: list[ColumnInfo], row: list[Any], number: int, state: SessionState,
                txn: Txn) -> dict:
    resolve = state_variable(state)
    mode = state.mode()
    values: dict[str, Any] = {}
    if not row:  # INSERT INTO t VALUES () / () VALUES (): every column takes its default
        return values
    for column, item in zip(columns, row):
        if isinstance(item, _Value):
            value = item.value
        elif _is_default(item):
            if column.is_generated:
                continue
            values[column.name] = column_default(column, txn.now, mode)
            continue
        else:
            value = Compiled(item, resolve).evaluate(values, now=txn.now)
        if column.is_generated:
            raise er.sql_error(er.GENERATED_COLUMN_VALUE, f"The value specified for generated column '{column.name}' "
                                                          f"in table '{info.name}' is not allowed.")
        values[column.name] = None if value is None else to_column(value, column, mode, number)
    return values


def _insert_one(txn: Txn, db_id: int, info: TableInfo, values: dict, replace: bool, ignore: bool,
                conflict: exp.OnConflict | None, state: SessionState, number: int) -> tuple[int, int]:
    """(affected rows, warnings) of one row."""
    row = txn.complete(db_id, info, values)
    if replace:
        clash = txn.conflicts(db_id, info, row)
        txn.put_row(db_id, info, row, replace=True)
        return 1 + len(clash), 0
    clash = txn.conflicts(db_id, info, row)
    if not clash:
        txn.put_row(db_id, info, row)
        return 1, 0
    if conflict is not None and conflict.args.get("duplicate"):
        return _on_duplicate(txn, db_id, info, clash[0], row, conflict, state, number), 0
    if ignore:
        return 0, 1
    txn.put_row(db_id, info, row)  # raises TiDB's duplicate-entry error for the clash
    return 1, 0


def _on_duplicate(txn: Txn, db_id: int, info: TableInfo, existing: RowRef, proposed: dict,
                  conflict: exp.OnConflict, state: SessionState, number: int) -> int:
    """ON DUPLICATE KEY UPDATE: assignments evaluated on the existing row, VALUES(c) the proposed one;
    2 affected rows when the row changed, 0 when it did not (MySQL's counts)."""
    resolve = state_variable(state)
    mode = state.mode()
    current = dict(existing.values)
    changes: dict[str, Any] = {}
    for assignment in conflict.expressions:
        column = _assigned_column(info, assignment.this)
        source = assignment.expression
        if _is_default(source):
            value = column_default(column, txn.now, mode)
        else:
            value = Compiled(source, resolve).evaluate({**current, **changes}, values=proposed, now=txn.now)
            value = None if value is None else to_column(value, column, mode, number)
        changes[column.name] = value
    new = txn.updated(info, current, changes)
    if _same_row(current, new):
        return 0
    txn.put_row(db_id, info, new, old=existing)
    return 2


def _assigned_column(info: TableInfo, node: exp.Expr) -> ColumnInfo:
    column = info.column_by_name(node.name)
    if column is None or column.state != 5:
        raise er.bad_field(node.name, "field list")
    return column


def _same_row(a: dict, b: dict) -> bool:
    return all(a.get(k) == v and type(a.get(k)) is type(v) for k, v in b.items() if k != EXTRA_HANDLE_NAME)


def execute_update(node: exp.Update, state: SessionState) -> Result:
    target = node.this
    if target.args.get("joins") or node.args.get("from_") or node.args.get("from"):
        raise er.not_supported("multi-table UPDATE")
    db, table = table_name(target, state)
    alias = target.alias_or_name
    resolve = state_variable(state)
    with state.statement() as txn:
        db_id, info = txn.table(db, table)
        assignments = [(_assigned_column(info, a.this), a.expression) for a in node.expressions]
        for attempt in range(_MAX_RETRIES):
            found = _locked(txn, db_id, info, node, state)
            if found is None:
                txn.new_read_ts()
                continue
            changed = 0
            mode = state.mode()
            for number, ref in enumerate(found, 1):
                current = dict(ref.values)
                changes: dict[str, Any] = {}
                for column, source in assignments:
                    if _is_default(source):
                        value = column_default(column, txn.now, mode)
                    else:
                        value = Compiled(rs.unqualified(source, alias), resolve).evaluate({**current, **changes},
                                                                                       now=txn.now)
                        value = None if value is None else to_column(value, column, mode, number)
                    changes[column.name] = value
                new = txn.updated(info, current, changes)
                if not _same_row(current, new):
                    txn.put_row(db_id, info, new, old=ref)
                    changed += 1
            return Result(affected=changed)
        raise er.sql_error(er.WRITE_CONFLICT, "Write conflict: the rows kept changing under the statement "
                                              "[try again later]")


def execute_delete(node: exp.Delete, state: SessionState) -> Result:
    target = node.this
    if node.args.get("using") or target.args.get("joins") or node.args.get("tables"):
        raise er.not_supported("multi-table DELETE")
    db, table = table_name(target, state)
    with state.statement() as txn:
        db_id, info = txn.table(db, table)
        for attempt in range(_MAX_RETRIES):
            found = _locked(txn, db_id, info, node, state)
            if found is None:
                txn.new_read_ts()
                continue
            for ref in found:
                txn.delete_row(db_id, info, ref)
            return Result(affected=len(found))
        raise er.sql_error(er.WRITE_CONFLICT, "Write conflict: the rows kept changing under the statement "
                                              "[try again later]")


def _locked(txn: Txn, db_id: int, info: TableInfo, node: exp.Expr, state: SessionState) -> list[RowRef] | None:
    """The rows the statement acts on, each locked at its latest version; None when one changed since
    the statement read it (the caller retries at a newer read ts)."""
    alias = node.this.alias_or_name
    where = node.args.get("where")
    where = rs.unqualified(where.this, alias) if where is not None else None
    order = node.args.get("order")
    order = rs.unqualified(order, alias) if order is not None else None
    chosen = rs.select_rows(txn, db_id, info, where, order, node.args.get("limit"), state_variable(state),
                            state.mode())
    locked = []
    for ref in chosen:
        latest = txn.current(db_id, info, ref)
        if latest is None or latest.values != ref.values:
            return None
        locked.append(latest)
    return locked
