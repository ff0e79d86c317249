"""`SHOW CREATE TABLE` text of a TableInfo, in TiDB's layout (pkg/executor `ConstructResultOfShowCreateTable`).

The Python front also uses it as the `query` of the DDL jobs it runs without SQL text, so a job
row always carries a statement that recreates the table.
"""

from __future__ import annotations

from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.schema import ColumnInfo, TableInfo
from tidelake.sim.tidb import partition as part

# display widths TiDB still prints for integer types (`GetDefaultFieldLengthAndDecimal`)
_INT_WIDTH = {mt.TYPE_TINY: 4, mt.TYPE_SHORT: 6, mt.TYPE_INT24: 9, mt.TYPE_LONG: 11, mt.TYPE_LONGLONG: 20}
_UNSIGNED_WIDTH = {mt.TYPE_TINY: 3, mt.TYPE_SHORT: 5, mt.TYPE_INT24: 8, mt.TYPE_LONG: 10, mt.TYPE_LONGLONG: 20}
_BLOB_NAMES = {mt.TYPE_TINY_BLOB: "tiny", mt.TYPE_BLOB: "", mt.TYPE_MEDIUM_BLOB: "medium", mt.TYPE_LONG_BLOB: "long"}


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _quote_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def type_sql(col: ColumnInfo) -> str:
    """The column type as SHOW CREATE TABLE prints it, e.g. `decimal(10,2)`, `varchar(64)`."""
    ft = col.field_type
    tp = ft.tp
    binary = mt.is_binary_string(ft)
    if tp in _INT_WIDTH:
        unsigned = mt.is_unsigned(ft.flag)
        width = ft.flen if ft.flen > 0 else (_UNSIGNED_WIDTH if unsigned else _INT_WIDTH)[tp]
        text = f"{mt.TYPE_NAMES[tp]}({width})"
        if tp == mt.TYPE_TINY and width == 1 and not unsigned:
            text = "tinyint(1)"
        return text + (" unsigned" if unsigned else "") + (" zerofill" if ft.flag & mt.ZEROFILL_FLAG else "")
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        args = f"({ft.flen},{ft.decimal})" if ft.decimal > 0 and ft.flen > 0 else ""
        return mt.TYPE_NAMES[tp] + args + (" unsigned" if mt.is_unsigned(ft.flag) else "")
    if tp == mt.TYPE_NEWDECIMAL:
        return f"decimal({ft.flen},{max(ft.decimal, 0)})" + (" unsigned" if mt.is_unsigned(ft.flag) else "")
    if tp in (mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP, mt.TYPE_DURATION):
        return mt.TYPE_NAMES[tp] + (f"({ft.decimal})" if ft.decimal > 0 else "")
    if tp == mt.TYPE_YEAR:
        return "year(4)"
    if tp == mt.TYPE_BIT:
        return f"bit({ft.flen})"
    if tp == mt.TYPE_VARCHAR:
        return f"{'varbinary' if binary else 'varchar'}({ft.flen})"
    if tp == mt.TYPE_STRING:
        return f"{'binary' if binary else 'char'}({ft.flen})"
    if tp in _BLOB_NAMES:
        return _BLOB_NAMES[tp] + ("blob" if binary else "text")
    if tp in (mt.TYPE_ENUM, mt.TYPE_SET):
        return f"{mt.TYPE_NAMES[tp]}(" + ",".join(_quote_text(e) for e in ft.elems or []) + ")"
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        return f"vector({ft.flen})" if ft.flen > 0 else "vector"
    return mt.TYPE_NAMES.get(tp, "unknown")


def _default_sql(col: ColumnInfo) -> str | None:
    ft = col.field_type
    if col.default_bit is not None:
        return "b'" + format(int.from_bytes(col.default_bit, "big"), "b") + "'"
    if col.default is None:
        if col.is_generated or mt.is_not_null(ft.flag) or ft.flag & mt.AUTO_INCREMENT_FLAG:
            return None
        if ft.tp in mt.BLOB_TYPES or ft.tp == mt.TYPE_JSON:
            return None
        return "NULL"
    text = str(col.default)
    if text.upper().startswith("CURRENT_TIMESTAMP"):
        return text
    if ft.tp in mt.INTEGER_TYPES | {mt.TYPE_FLOAT, mt.TYPE_DOUBLE, mt.TYPE_NEWDECIMAL, mt.TYPE_YEAR}:
        return _quote_text(text)
    return _quote_text(text)


def column_sql(col: ColumnInfo, table_charset: str = "utf8mb4", table_collate: str = "utf8mb4_bin") -> str:
    ft = col.field_type
    text = f"{q(col.name)} {type_sql(col)}"
    if ft.tp in mt.STRING_TYPES | {mt.TYPE_ENUM, mt.TYPE_SET} and not mt.is_binary_string(ft):
        if ft.charset and ft.charset != table_charset:
            text += f" CHARACTER SET {ft.charset}"
        if ft.collate and ft.collate != table_collate:
            text += f" COLLATE {ft.collate}"
    if col.is_generated:
        text += f" GENERATED ALWAYS AS ({col.generated_expr_string}) {'STORED' if col.generated_stored else 'VIRTUAL'}"
    if mt.is_not_null(ft.flag):
        text += " NOT NULL"
    default = _default_sql(col)
    if default is not None:
        text += f" DEFAULT {default}"
    if ft.flag & mt.ON_UPDATE_NOW_FLAG:
        text += " ON UPDATE CURRENT_TIMESTAMP" + (f"({ft.decimal})" if ft.decimal > 0 else "")
    if ft.flag & mt.AUTO_INCREMENT_FLAG:
        text += " AUTO_INCREMENT"
    if col.comment:
        text += f" COMMENT {_quote_text(col.comment)}"
    return text


def _key_parts(table: TableInfo, columns: Any) -> str:
    return ",".join(q(c.name) + (f"({c.length})" if c.length > 0 else "") for c in columns)


def show_create_table(table: TableInfo) -> str:
    lines = [f"  {column_sql(c, table.charset, table.collate)}" for c in table.public_columns()]
    auto_random = (table.raw or {}).get("auto_random_bits") or 0
    handle = table.handle_column()
    if handle is not None:
        lines[[c.name for c in table.public_columns()].index(handle.name)] += \
            f" /*T![auto_rand] AUTO_RANDOM({auto_random}) */" if auto_random else ""
        lines.append(f"  PRIMARY KEY ({q(handle.name)}) /*T![clustered_index] CLUSTERED */")
    for idx in table.indices:
        if idx.state != 5:
            continue
        if idx.primary:
            kind = "CLUSTERED" if table.is_common_handle else "NONCLUSTERED"
            lines.append(f"  PRIMARY KEY ({_key_parts(table, idx.columns)}) /*T![clustered_index] {kind} */")
        else:
            lines.append(f"  {'UNIQUE ' if idx.unique else ''}KEY {q(idx.name)} ({_key_parts(table, idx.columns)})"
                         + (" /*!80000 INVISIBLE */" if idx.invisible else ""))
    text = f"CREATE TABLE {q(table.name)} (\n" + ",\n".join(lines) + "\n)"
    text += f" ENGINE=InnoDB DEFAULT CHARSET={table.charset or 'utf8mb4'} COLLATE={table.collate or 'utf8mb4_bin'}"
    if table.comment:
        text += f" COMMENT={_quote_text(table.comment)}"
    if table.partition is not None:
        text += "\n" + partition_sql(table)
    return text


def partition_sql(table: TableInfo) -> str:
    info = table.partition
    kind = part.partition_type_name(info)
    target = ",".join(q(c) for c in info.columns) if info.columns else info.expr
    text = f"PARTITION BY {kind} ({target})"
    if info.type in (part.HASH, part.KEY):
        return text + f" PARTITIONS {len(info.definitions)}"
    defs = []
    for d in info.definitions:
        if info.type == part.RANGE:
            bound = ",".join(d.raw.get("less_than") or [])
            defs.append(f"PARTITION {q(d.name)} VALUES LESS THAN ({bound})")
        else:
            groups = d.raw.get("in_values") or []
            values = ",".join(g[0] if len(g) == 1 else "(" + ",".join(g) + ")" for g in groups)
            defs.append(f"PARTITION {q(d.name)} VALUES IN ({values})")
    return text + "\n(" + ",\n ".join(defs) + ")"
