"""The rows a single-table statement reads: point lookups, handle ranges or a scan, then WHERE.

Like TiDB's planner for the simple cases: a WHERE that pins every handle column with `=` or `IN`
reads those keys only (PointGet/BatchPointGet); bounds on an integer handle read that key range;
anything else scans the table's record spans. The WHERE is then evaluated on every row read with
MySQL's semantics (tidelake/sim/tidb/expr.py), followed by ORDER BY and LIMIT.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import cmp_to_key
from typing import Any

from sqlglot import exp

from tidelake.codec import mysql_types as mt
from tidelake.codec.row import EXTRA_HANDLE_NAME
from tidelake.codec.schema import TableInfo
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import Mode, to_column
from tidelake.sim.tidb.dml import RowRef, Txn
from tidelake.sim.tidb.expr import Compiled, compare, to_number

_I64 = (-(1 << 63), (1 << 63) - 1)


def conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    if isinstance(node, exp.Paren):
        return conjuncts(node.this)
    if isinstance(node, exp.And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]


def _constant(node: exp.Expr, resolve: Callable[[exp.Expr], Any] | None) -> tuple[bool, Any]:
    if any(isinstance(n, exp.Column) for n in node.find_all(exp.Column)):
        return False, None
    try:
        return True, Compiled(node, resolve).evaluate({})
    except er.SqlError:
        return False, None


def _handle_columns(info: TableInfo) -> list[str]:
    if info.pk_is_handle:
        return [info.handle_column().name]
    if info.is_common_handle:
        primary = info.primary_index()
        if any(c.length > 0 for c in primary.columns):
            return []
        return [c.name for c in primary.columns]
    return [EXTRA_HANDLE_NAME]


def point_keys(info: TableInfo, where: exp.Expr | None, resolve: Callable | None = None,
               mode: Mode | None = None) -> list[dict] | None:
    """Key dicts (handle column -> value) the WHERE pins every handle column to, or None."""
    wanted = {c.lower(): c for c in _handle_columns(info)}
    if not wanted:
        return None
    pinned: dict[str, list[Any]] = {}
    for term in conjuncts(where):
        column, values = None, None
        if isinstance(term, exp.EQ):
            for left, right in ((term.this, term.expression), (term.expression, term.this)):
                if isinstance(left, exp.Column) and left.name.lower() in wanted:
                    ok, value = _constant(right, resolve)
                    if ok:
                        column, values = left.name.lower(), [value]
                        break
        elif isinstance(term, exp.In) and isinstance(term.this, exp.Column) and term.this.name.lower() in wanted \
                and not term.args.get("query"):
            found = [_constant(e, resolve) for e in term.expressions]
            if all(ok for ok, _ in found):
                column, values = term.this.name.lower(), [v for _, v in found]
        if column is not None:
            converted = _as_handle_values(info, wanted[column], values, mode)
            if converted is None:
                return None
            pinned[column] = converted if column not in pinned else [v for v in pinned[column] if v in converted]
    if set(pinned) != set(wanted):
        return None
    names = list(wanted)
    return [{wanted[n]: v for n, v in zip(names, combo)} for combo in itertools.product(*(pinned[n] for n in names))]


def _as_handle_values(info: TableInfo, name: str, values: list[Any], mode: Mode | None) -> list[Any] | None:
    """Values as the handle column stores them; None when one does not convert (the scan decides)."""
    if name == EXTRA_HANDLE_NAME:
        return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    column = info.column_by_name(name)
    out = []
    for value in values:
        if value is None:
            continue  # `= NULL` matches nothing
        try:
            out.append(to_column(value, column, mode or Mode()))
        except er.SqlError:
            return None
    return out


def handle_range(info: TableInfo, where: exp.Expr | None, resolve: Callable | None = None) -> tuple[int, int] | None:
    """Inclusive bounds an integer handle is held to by `>`, `>=`, `<`, `<=`, BETWEEN, or None."""
    handle = info.handle_column() if info.pk_is_handle else None
    if handle is None or mt.is_unsigned(handle.field_type.flag):
        return None
    low, high, bounded = _I64[0], _I64[1], False
    for term in conjuncts(where):
        if isinstance(term, exp.Between) and isinstance(term.this, exp.Column) and \
                term.this.name.lower() == handle.name.lower():
            ok_lo, lo = _constant(term.args["low"], resolve)
            ok_hi, hi = _constant(term.args["high"], resolve)
            if ok_lo and ok_hi and _is_int(lo) and _is_int(hi):
                low, high, bounded = max(low, lo), min(high, hi), True
            continue
        for cls, flipped in ((exp.GT, exp.LT), (exp.GTE, exp.LTE), (exp.LT, exp.GT), (exp.LTE, exp.GTE)):
            if not isinstance(term, cls):
                continue
            left, right, op = term.this, term.expression, cls
            if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
                left, right, op = right, left, flipped
            if not (isinstance(left, exp.Column) and left.name.lower() == handle.name.lower()):
                continue
            ok, value = _constant(right, resolve)
            if not ok or not _is_int(value):
                continue
            if op is exp.GT:
                low = max(low, value + 1)
            elif op is exp.GTE:
                low = max(low, value)
            elif op is exp.LT:
                high = min(high, value - 1)
            else:
                high = min(high, value)
            bounded = True
    return (low, high) if bounded else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_rows(txn: Txn, db_id: int, info: TableInfo, where: exp.Expr | None,
              resolve: Callable | None = None, mode: Mode | None = None, snapshot: bool = False) -> list[RowRef]:
    """The rows a statement's WHERE could select (a superset; `select_rows` applies the WHERE).
    `snapshot`: a plain SELECT's read at the transaction's start ts, locking nothing."""
    keys = point_keys(info, where, resolve, mode)
    if keys is not None:
        found = [txn.find(db_id, info, key, snapshot=snapshot) for key in keys]
        return [r for r in found if r is not None]
    bounds = handle_range(info, where, resolve)
    if bounds is not None:
        return txn.rows(db_id, info, handle_range=bounds, snapshot=snapshot)
    return txn.rows(db_id, info, snapshot=snapshot)


def select_rows(txn: Txn, db_id: int, info: TableInfo, where: exp.Expr | None, order: exp.Order | None,
                limit: exp.Expr | None, resolve: Callable | None = None, mode: Mode | None = None) -> list[RowRef]:
    """The rows UPDATE/DELETE act on, in ORDER BY order, at most LIMIT of them."""
    rows = read_rows(txn, db_id, info, where, resolve, mode)
    if where is not None:
        condition = Compiled(where, resolve)
        rows = [r for r in rows if is_true(condition.evaluate(r.values, now=txn.now))]
    if order is not None:
        rows = order_rows(rows, order, resolve, txn)
    if limit is not None:
        ok, count = _constant(limit.expression, resolve)
        if not ok or not _is_int(count):
            raise er.sql_error(er.WRONG_VALUE_COUNT, "LIMIT needs an integer")
        rows = rows[:count]
    return rows


def order_rows(rows: list[RowRef], order: exp.Order, resolve: Callable | None, txn: Txn) -> list[RowRef]:
    keys = [(Compiled(o.this, resolve), bool(o.args.get("desc"))) for o in order.expressions]

    def cmp(a: RowRef, b: RowRef) -> int:
        for compiled, desc in keys:
            x, y = compiled.evaluate(a.values, now=txn.now), compiled.evaluate(b.values, now=txn.now)
            if x is None or y is None:
                result = (x is not None) - (y is not None)  # NULL sorts first ascending
            else:
                result = compare(x, y) or 0
            if result:
                return -result if desc else result
        return 0
    return sorted(rows, key=cmp_to_key(cmp))


def is_true(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, (str, bytes)):  # MySQL reads a string condition as its number
        return to_number(value) != 0
    return bool(value)


def unqualified(node: exp.Expr, alias: str) -> exp.Expr:
    """Column references qualified by the table's own name or alias, as plain column names."""
    def strip(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and n.table and n.table.lower() == alias.lower():
            return exp.column(n.name)
        return n
    return node.transform(strip)
