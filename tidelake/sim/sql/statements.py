"""One statement, dispatched by kind: transactions, USE, SET, DDL, DML, SELECT, SHOW.

A kind the front does not run answers TiDB's 1235 naming it, and nothing of it is applied.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from tidelake.sim.sql import ddl_statements, dml_statements, show
from tidelake.sim.sql import variables as sv
from tidelake.sim.sql.parse import Statement
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.select import evaluate_constants, run_select
from tidelake.sim.sql.split import execute_split
from tidelake.sim.sql.state import SessionState, state_variable
from tidelake.sim.tidb import dialect as td
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.dialect import TiDB
from tidelake.sim.tidb.expr import Compiled


def execute(statement: Statement, state: SessionState) -> Result:
    tree, text = statement.tree, statement.text
    if isinstance(tree, exp.Transaction):
        modes = {m.upper() for m in (tree.args.get("modes") or [])}
        kind = str(tree.this or "").upper()
        mode = "optimistic" if "OPTIMISTIC" in kind or "OPTIMISTIC" in modes else \
            "pessimistic" if "PESSIMISTIC" in kind or "PESSIMISTIC" in modes else None
        state.begin(mode)
        return Result()
    if isinstance(tree, exp.Commit):
        state.commit()
        return Result()
    if isinstance(tree, exp.Rollback):
        if tree.args.get("savepoint"):
            state.rollback_to_savepoint(tree.args["savepoint"].name)
        else:
            state.rollback()
        return Result()
    if isinstance(tree, td.SplitTable):
        return execute_split(tree, state)
    if isinstance(tree, td.Do):
        evaluate_constants(tree.expressions, state)
        return Result()
    if isinstance(tree, td.Savepoint):
        if tree.args.get("release"):
            state.rollback_to_savepoint(tree.this.name, release=True)
        else:
            state.savepoint(tree.this.name)
        return Result()
    if isinstance(tree, exp.Use):
        name = tree.this.name
        state.tidb.catalog.db(name)
        state.database = state.tidb.catalog.db(name).name
        return Result()
    if isinstance(tree, exp.Set):
        return _set(tree, state)
    if isinstance(tree, exp.Create):
        return ddl_statements.execute_create(tree, text, state)
    if isinstance(tree, exp.Drop):
        return ddl_statements.execute_drop(tree, text, state)
    if isinstance(tree, exp.Alter):
        return ddl_statements.execute_alter(tree, text, state)
    if isinstance(tree, exp.TruncateTable):
        return ddl_statements.execute_truncate(tree, text, state)
    if isinstance(tree, td.RenameTables):
        return ddl_statements.execute_rename(tree, text, state)
    if isinstance(tree, td.Replace):
        return dml_statements.execute_insert(tree.this, state, replace=True)
    if isinstance(tree, exp.Insert):
        return dml_statements.execute_insert(tree, state)
    if isinstance(tree, exp.Update):
        return dml_statements.execute_update(tree, state)
    if isinstance(tree, exp.Delete):
        return dml_statements.execute_delete(tree, state)
    if isinstance(tree, exp.Select):
        return run_select(tree, state)
    if isinstance(tree, exp.Show):
        return show.execute_show(tree, state)
    if isinstance(tree, exp.Describe):
        target = tree.this
        db = state.db(target.args.get("db").name if target.args.get("db") else None)
        return show.describe(state.tidb.catalog.table(db, target.name))
    raise er.not_supported(f"{type(tree).__name__.upper()} statements ({' '.join(text.split()[:3])})")


def _set(tree: exp.Set, state: SessionState) -> Result:
    """SET [GLOBAL|SESSION] var = value, SET NAMES, SET TRANSACTION, SET @user = value (kept per session)."""
    for item in tree.expressions:
        kind = (item.args.get("kind") or "").upper()
        if kind in ("NAMES", "CHARACTER SET"):
            charset = item.name.lower() if item.name and item.name.upper() != "DEFAULT" else "utf8mb4"
            for name in ("character_set_client", "character_set_connection", "character_set_results"):
                sv.set_variable(state.variables, state.globals, name, charset, "SESSION")
            continue
        if kind == "TRANSACTION":
            continue  # isolation levels: the front's statements read as TiDB's RR and RC both do here
        assignment = item.this
        if not isinstance(assignment, exp.EQ):
            raise er.not_supported(f"SET {item.sql(dialect=TiDB)}")
        left, right = assignment.this, assignment.expression
        value = _value(right, state)
        if isinstance(left, exp.Parameter):
            state.user_variables[left.name.lower()] = value
            continue
        scope = (left.args.get("kind") if isinstance(left, exp.SessionParameter) else None) or kind or "SESSION"
        scope = "SESSION" if scope.upper() == "LOCAL" else scope.upper()
        if left.name.lower() == "autocommit" and sv._bool(value) and state.txn is not None and not state.explicit:
            state.commit()  # autocommit=1 commits the implicit transaction
        sv.set_variable(state.variables, state.globals, left.name, value, scope)
    return Result()


def _value(node: exp.Expr, state: SessionState) -> Any:
    """A SET value: a bare word (ON, OFF, TRADITIONAL) is its text, anything else is evaluated."""
    if isinstance(node, exp.Var) or (isinstance(node, exp.Column) and not node.table):
        return node.name
    if isinstance(node, exp.Boolean):
        return "ON" if node.this else "OFF"
    return Compiled(node, state_variable(state)).evaluate({})
