"""SHOW DATABASES / TABLES / CREATE TABLE / CREATE DATABASE / COLUMNS / INDEX and DESCRIBE, from the
front's catalog, with TiDB's column names (`Tables_in_<db>`, `Create Table`...). Other SHOW forms
(VARIABLES, STATUS, WARNINGS...) are mysql-mimic's (SqlSession delegates them).
"""

from __future__ import annotations

import re

from sqlglot import exp

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import TableInfo
from tidelake.sim.sql.result import Result
from tidelake.sim.sql.state import SessionState
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.show_create import q, show_create_table, type_sql

OURS = {"DATABASES", "TABLES", "CREATE TABLE", "CREATE DATABASE", "COLUMNS", "INDEX", "INDEXES", "KEYS"}


def _like(pattern: exp.Expr | None) -> re.Pattern | None:
    if pattern is None:
        return None
    text = pattern.name
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in text)
    return re.compile(f"^{regex}$", re.IGNORECASE | re.DOTALL)


def execute_show(node: exp.Show, state: SessionState) -> Result:
    kind = node.name.upper()
    like = _like(node.args.get("like"))
    catalog = state.tidb.catalog
    if kind == "DATABASES":
        names = sorted(db.name for db in catalog.dbs.values())
        names = ["INFORMATION_SCHEMA", "METRICS_SCHEMA", "PERFORMANCE_SCHEMA"] + names
        return Result(rows=[(n,) for n in names if like is None or like.match(n)], columns=["Database"])
    if kind == "TABLES":
        db = state.db(node.args.get("db").name if node.args.get("db") else None)
        catalog.db(db)
        names = sorted(info.name for info in catalog.tables.get(catalog.db(db).id, {}).values())
        rows = [(n, "BASE TABLE") if node.args.get("full") else (n,) for n in names if like is None or like.match(n)]
        columns = [f"Tables_in_{db}"] + (["Table_type"] if node.args.get("full") else [])
        return Result(rows=rows, columns=columns)
    if kind == "CREATE DATABASE":
        db = catalog.db(node.args["target"].name)
        text = (f"CREATE DATABASE {q(db.name)} /*!40100 DEFAULT CHARACTER SET {db.charset} "
                f"COLLATE {db.collate} */")
        return Result(rows=[(db.name, text)], columns=["Database", "Create Database"])
    info = _table(node, state)
    if kind == "CREATE TABLE":
        return Result(rows=[(info.name, show_create_table(info))], columns=["Table", "Create Table"])
    if kind == "COLUMNS":
        return describe(info, full=bool(node.args.get("full")))
    return _indexes(info)


def _table(node: exp.Show, state: SessionState) -> TableInfo:
    target = node.args.get("target")
    if target is None:
        raise er.sql_error(er.PARSE, "SHOW needs a table")
    db = node.args.get("db").name if node.args.get("db") else (target.args.get("db").name
                                                                if isinstance(target, exp.Table) and target.args.get("db")
                                                                else None)
    return state.tidb.catalog.table(state.db(db), target.name)


def describe(info: TableInfo, full: bool = False) -> Result:
    """DESCRIBE t / SHOW COLUMNS FROM t: Field, Type, Null, Key, Default, Extra."""
    rows = []
    for col in info.public_columns():
        flag = col.field_type.flag
        key = "PRI" if flag & mt.PRI_KEY_FLAG else "UNI" if flag & mt.UNIQUE_KEY_FLAG else \
            "MUL" if flag & mt.MULTIPLE_KEY_FLAG else ""
        extra = []
        if flag & mt.AUTO_INCREMENT_FLAG:
            extra.append("auto_increment")
        if col.is_generated:
            extra.append("STORED GENERATED" if col.generated_stored else "VIRTUAL GENERATED")
        if flag & mt.ON_UPDATE_NOW_FLAG:
            extra.append("DEFAULT_GENERATED on update CURRENT_TIMESTAMP")
        row = (col.name, type_sql(col), "NO" if mt.is_not_null(flag) else "YES", key,
               None if col.default is None else str(col.default), " ".join(extra))
        rows.append(row + ((col.field_type.collate or None, "select,insert,update,references", col.comment)
                           if full else ()))
    columns = ["Field", "Type", "Null", "Key", "Default", "Extra"] + \
        (["Collation", "Privileges", "Comment"] if full else [])
    if full:
        columns = ["Field", "Type", "Collation", "Null", "Key", "Default", "Extra", "Privileges", "Comment"]
        rows = [(r[0], r[1], r[6], r[2], r[3], r[4], r[5], r[7], r[8]) for r in rows]
    return Result(rows=rows, columns=columns)


def _indexes(info: TableInfo) -> Result:
    rows = []
    handle = info.handle_column()
    if handle is not None:
        rows.append((info.name, 0, "PRIMARY", 1, handle.name, "A", 0, None, None, "", "BTREE", "", "", "YES", None,
                     "YES"))
    for idx in info.indices:
        for seq, col in enumerate(idx.columns, 1):
            rows.append((info.name, 0 if idx.unique else 1, idx.name, seq, col.name, "A", 0,
                         col.length if col.length > 0 else None, None, "", "BTREE", "", idx.comment,
                         "NO" if idx.invisible else "YES", None, "YES" if idx.primary and info.is_common_handle else "NO"))
    columns = ["Table", "Non_unique", "Key_name", "Seq_in_index", "Column_name", "Collation", "Cardinality",
               "Sub_part", "Packed", "Null", "Index_type", "Comment", "Index_comment", "Visible", "Expression",
               "Clustered"]
    return Result(rows=rows, columns=columns)
