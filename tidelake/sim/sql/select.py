"""SELECT over one table, good enough to check what was written: point gets, ranges, COUNT(*),
aggregates, ORDER BY, LIMIT, and stale reads `AS OF TIMESTAMP`.

The rows come from the table's record keys at the read timestamp (the open transaction's start
ts and its own writes, a fresh TSO in autocommit, or the AS OF time), read through
tidelake/sim/sql/rows.py and filtered by the WHERE with MySQL's semantics; projection,
aggregation, ordering and LIMIT then run in sqlglot's Python executor over those rows. Joins,
subqueries and UNION are refused by name: sqlglot's executor does not run them faithfully.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from mysql_mimic import ResultColumn
from mysql_mimic.charset import CharacterSet
from mysql_mimic.types import ColumnType
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.executor.python import PythonExecutor
from sqlglot.executor.table import Table, ensure_tables
from sqlglot.optimizer import optimize
from sqlglot.planner import Plan

from tidelake.codec import mysql_types as mt
from tidelake.codec.mytime import MySQLTime
from tidelake.codec.row import EXTRA_HANDLE_NAME
from tidelake.codec.schema import TableInfo
from tidelake.sim.sql import rows as rs
from tidelake.sim.sql import variables as sv
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.state import SessionState, state_variable, table_name
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.coerce import duration_text, value_text
from tidelake.sim.tidb.dialect import TiDB
from tidelake.sim.tidb.dml import RowRef, Txn
from tidelake.sim.tidb.expr import Compiled, statement_env
from tidelake.sim.tidb.table_changes import rows_of
from tidelake.tso import compose

_SQL_TYPES = {
    mt.TYPE_TINY: "TINYINT", mt.TYPE_SHORT: "SMALLINT", mt.TYPE_INT24: "INT", mt.TYPE_LONG: "INT",
    mt.TYPE_LONGLONG: "BIGINT", mt.TYPE_FLOAT: "FLOAT", mt.TYPE_DOUBLE: "DOUBLE", mt.TYPE_NEWDECIMAL: "DECIMAL",
    mt.TYPE_DATE: "DATE", mt.TYPE_DATETIME: "DATETIME", mt.TYPE_TIMESTAMP: "DATETIME", mt.TYPE_DURATION: "TIME",
    mt.TYPE_YEAR: "INT", mt.TYPE_BIT: "BIGINT", mt.TYPE_JSON: "JSON",
}


def evaluate_constants(expressions: list[exp.Expr], state: SessionState) -> list[Any]:
    """Expressions without columns (SELECT SLEEP(1), DO ...), evaluated with the session's values."""
    now = sv.now_in(state.variables)
    resolve = state_variable(state)
    return [Compiled(e.unalias() if isinstance(e, exp.Alias) else e, resolve).evaluate(None, now=now)
            for e in expressions]


def constant_select(tree: exp.Select, state: SessionState) -> Result:
    """A SELECT without a table that mysql-mimic does not answer itself (client_session.py: SLEEP)."""
    values = evaluate_constants(tree.expressions, state)
    columns = [e.alias if isinstance(e, exp.Alias) else e.sql(dialect=TiDB) for e in tree.expressions]
    return Result(rows=[tuple(values)], columns=columns)


def run_select(tree: exp.Expr, state: SessionState, txn: Txn | None = None) -> Result:
    """The result of a single-table SELECT; `txn` reads inside that transaction (INSERT ... SELECT)."""
    if not isinstance(tree, exp.Select):
        raise er.not_supported(f"{type(tree).__name__.upper()} queries (only single-table SELECT)")
    tables = list(tree.find_all(exp.Table))
    if not tables and not tree.args.get("from"):
        return constant_select(tree, state)
    if len(tables) != 1 or tree.args.get("joins") or any(tree.find_all(exp.Subquery)) or tree.find(exp.Exists):
        raise er.not_supported("SELECT with JOIN, subqueries or several tables (the simulator's SQL front reads one "
                               "table per SELECT)")
    if tree.args.get("locks"):
        raise er.not_supported("SELECT ... FOR UPDATE")
    table = tables[0]
    db, name = table_name(table, state)
    version = table.args.get("version")
    ts, reader = _snapshot(version, state, txn)
    info = _table_at(state, db, name, ts, version is not None)
    where = tree.args.get("where")
    resolve = state_variable(state)
    alias = table.alias_or_name
    condition = rs.unqualified(where.this, alias) if where is not None else None
    db_id = state.tidb.catalog.db(db).id
    found = rs.read_rows(reader, db_id, info, condition, resolve, state.mode(), snapshot=True) \
        if reader is not None else [values for _, _, values in rows_of(state.tidb.cluster, info, ts)]
    values = [r.values if isinstance(r, RowRef) else r for r in found]
    if condition is not None:
        compiled = Compiled(condition, resolve)
        now = sv.now_in(state.variables)
        values = [v for v in values if rs.is_true(compiled.evaluate(v, now=now))]
    query = tree.copy()
    query.set("where", None)
    return _execute(query, db, info, values, state)


def _snapshot(version: exp.Version | None, state: SessionState, txn: Txn | None) -> tuple[int, Txn | None]:
    """(read ts, the transaction reading at it): AS OF reads at its time with no transaction."""
    if version is None:
        if txn is not None:
            return txn.start_ts, txn
        if state.txn is not None:
            return state.txn.start_ts, state.txn
        reader = state.tidb.txn(mode="optimistic")  # a snapshot read at a fresh TSO; it never writes
        return reader.start_ts, reader
    if state.txn is not None:
        raise er.sql_error((8135, "HY000"), "can not set read timestamp in an explicit transaction")
    value = Compiled(version.expression, state_variable(state)).evaluate({}, now=sv.now_in(state.variables))
    return _as_tso(value, state), None


def _as_tso(value: Any, state: SessionState) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 1 << 40:
        return value  # a TSO itself
    if isinstance(value, str):
        value = datetime.fromisoformat(value.strip())
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day)
    if not isinstance(value, datetime):
        raise er.sql_error((8135, "HY000"), f"invalid as of timestamp: {value_text(value)}")
    moment = value if value.tzinfo else value.replace(tzinfo=sv.session_time_zone(state.variables))
    ms = int(moment.astimezone(timezone.utc).timestamp() * 1000)
    if ms > int(datetime.now(timezone.utc).timestamp() * 1000):
        raise er.sql_error((9006, "HY000"), "cannot set read timestamp to a future time")
    return compose(ms) | ((1 << 18) - 1)


def _table_at(state: SessionState, db: str, name: str, ts: int, stale: bool) -> TableInfo:
    if not stale:
        return state.tidb.catalog.table(db, name)
    catalog = Catalog.load(state.tidb.cluster, ts)
    if catalog is None or not catalog.has_table(db, name):
        raise er.no_such_table(db, name)
    return catalog.table(db, name)



def _execute(query: exp.Select, db: str, info: TableInfo, values: list[dict], state: SessionState) -> Result:
    columns = [c for c in info.public_columns()]
    names = [c.name.lower() for c in columns]
    if any(v.get(EXTRA_HANDLE_NAME) is not None for v in values[:1]) and \
            any(c.name.lower() == EXTRA_HANDLE_NAME for c in query.find_all(exp.Column)):
        names.append(EXTRA_HANDLE_NAME)
    lowered = [{k.lower(): v for k, v in row.items()} for row in values]
    data = Table(names, [tuple(_cell(row.get(n)) for n in names) for row in lowered])
    schema = {db.lower(): {info.name.lower(): {n: _sql_type(c) for n, c in zip(names, columns + [None])}}}
    for table in query.find_all(exp.Table):
        table.set("version", None)
        table.set("db", exp.to_identifier(db.lower()))
        table.set("this", exp.to_identifier(info.name.lower()))
    try:
        optimized = optimize(query, schema, dialect=TiDB, leave_tables_isolated=True)
        tables = ensure_tables({db.lower(): {info.name.lower(): data}})
        output = PythonExecutor(env=statement_env(sv.now_in(state.variables)), tables=tables).execute(Plan(optimized))
    except er.SqlError:
        raise
    except SqlglotError as err:
        kind = er.BAD_FIELD if "column" in str(err).lower() else er.UNKNOWN
        raise er.sql_error(kind, str(err).splitlines()[0]) from None
    labels = _labels(query, output.columns)
    rows = [tuple(_out(v, state) for v in row) for row in output.rows]
    return Result(rows=rows, columns=_result_columns(labels, rows))


def _labels(query: exp.Select, names: tuple) -> list[str]:
    """The column names MySQL shows: an alias, a column's name, else the expression's text."""
    out = []
    star = any(isinstance(e, exp.Star) for e in query.expressions)
    if star:
        return list(names)
    for expression, name in zip(query.expressions, names):
        if isinstance(expression, exp.Alias):
            out.append(expression.alias)
        elif isinstance(expression, exp.Column):
            out.append(expression.name)
        else:
            out.append(expression.sql(dialect=TiDB))
    return out


def _sql_type(column: Any) -> str:
    if column is None:
        return "BIGINT"
    return _SQL_TYPES.get(column.field_type.tp, "TEXT")


def _cell(value: Any) -> Any:
    """A stored value as sqlglot's executor compares it (aware TIMESTAMPs as naive UTC)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def _out(value: Any, state: SessionState) -> Any:
    """A value as the text protocol shows it."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(sv.session_time_zone(state.variables)).replace(tzinfo=None)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    if isinstance(value, MySQLTime):
        return value.text()
    if isinstance(value, timedelta):
        return duration_text(value, 6 if value.microseconds else 0)
    return value


def _result_columns(labels: list[str], rows: list[tuple]) -> list[ResultColumn]:
    out = []
    for i, label in enumerate(labels):
        sample = next((row[i] for row in rows if row[i] is not None), None)
        kind = _wire_type(sample)
        binary = kind == ColumnType.BLOB  # charset 63: clients hand binary strings back as bytes
        out.append(ResultColumn(label, kind, character_set=CharacterSet.binary) if binary else ResultColumn(label, kind))
    return out


def _wire_type(sample: Any) -> ColumnType:
    if sample is None:
        return ColumnType.NULL
    if isinstance(sample, int):
        return ColumnType.LONGLONG if -(1 << 63) <= sample < 1 << 63 else ColumnType.NEWDECIMAL
    if isinstance(sample, float):
        return ColumnType.DOUBLE
    if isinstance(sample, Decimal):
        return ColumnType.NEWDECIMAL
    if isinstance(sample, datetime):
        return ColumnType.DATETIME
    if isinstance(sample, date):
        return ColumnType.DATE
    if isinstance(sample, (bytes, bytearray)):
        return ColumnType.BLOB
    return ColumnType.VAR_STRING
