"""A column definition of CREATE/ALTER TABLE as the front declares it (tidb.types.ColumnDef).

sqlglot's DataType becomes the type text the front parses (`decimal(10,2) unsigned`); column
options become ColumnDef fields; a DEFAULT is evaluated and converted to the column's type, as TiDB
checks it (error 1067 when it does not fit). Options TiDB ignores (CHECK while
tidb_enable_check_constraint is off, inline REFERENCES) are ignored; those the simulator does not
implement are refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from tidelake.sim.tidb import dialect as td
from tidelake.sim.tidb import sql_errors as er
from tidelake.sim.tidb.coerce import to_type
from tidelake.sim.tidb.dialect import TiDB
from tidelake.sim.tidb.expr import Compiled
from tidelake.sim.tidb.types import CURRENT_TIMESTAMP, ColumnDef, parse_field_type, with_charset

T = exp.DataType.Type
_SIMPLE: dict[Any, str] = {
    T.TINYINT: "tinyint", T.UTINYINT: "tinyint unsigned", T.SMALLINT: "smallint", T.USMALLINT: "smallint unsigned",
    T.MEDIUMINT: "mediumint", T.UMEDIUMINT: "mediumint unsigned", T.INT: "int", T.UINT: "int unsigned",
    T.BIGINT: "bigint", T.UBIGINT: "bigint unsigned", T.DOUBLE: "double", T.DATE: "date", T.DATETIME: "datetime",
    T.TIMESTAMP: "timestamp", T.TIMESTAMPTZ: "timestamp", T.TIME: "time", T.YEAR: "year", T.BIT: "bit",
    T.JSON: "json", T.CHAR: "char", T.NCHAR: "char", T.VARCHAR: "varchar", T.NVARCHAR: "varchar",
    T.BINARY: "binary", T.VARBINARY: "varbinary", T.TEXT: "text", T.TINYTEXT: "tinytext",
    T.MEDIUMTEXT: "mediumtext", T.LONGTEXT: "longtext", T.BLOB: "blob", T.TINYBLOB: "tinyblob",
    T.MEDIUMBLOB: "mediumblob", T.LONGBLOB: "longblob", T.VECTOR: "vector", T.DECIMAL: "decimal",
    T.UDECIMAL: "decimal unsigned", T.UDOUBLE: "double unsigned", T.FLOAT: "float", T.BOOLEAN: "tinyint",
    T.ENUM: "enum", T.SET: "set",
}
_WITH_ARGS = {"decimal", "decimal unsigned", "float", "double", "char", "varchar", "binary", "varbinary", "bit",
              "datetime", "timestamp", "time", "vector"}
_INTEGER_NAMES = {"tinyint", "smallint", "mediumint", "int", "bigint"}


def type_text(kind: exp.DataType) -> str:
    """The front's type text for a parsed type (BOOL is tinyint(1); FLOAT(p > 24) is double)."""
    dtype = kind.this
    name = _SIMPLE.get(dtype)
    if name is None:
        raise er.not_supported(f"column type {kind.sql(dialect=TiDB)}")
    args = [p.this.name if isinstance(p, exp.DataTypeParam) else p.name for p in kind.expressions]
    if dtype == T.BOOLEAN:
        return "tinyint(1)"
    if name in ("enum", "set"):
        members = ",".join("'" + p.this.name.replace("'", "''") + "'" if isinstance(p, exp.DataTypeParam) else
                           "'" + p.name.replace("'", "''") + "'" for p in kind.expressions)
        return f"{name}({members})"
    base, _, unsigned = name.partition(" ")
    if dtype == T.UDOUBLE and kind.meta.get("float"):  # FLOAT UNSIGNED (tidelake/sim/tidb/dialect.py)
        base = "float"
    if base == "float" and len(args) == 1:
        return "double" if int(args[0]) > 24 else "float"
    if base in _INTEGER_NAMES and args:  # a display width changes nothing stored
        return name
    if base in ("text", "blob") and args:
        return name
    if base == "decimal" and len(args) == 1:
        args.append("0")
    text = base + (f"({','.join(args)})" if args and base in _WITH_ARGS else "")
    return text + (f" {unsigned}" if unsigned else "")


@dataclass(frozen=True)
class ParsedColumn:
    """A column and the table-level facts its options declare (key, clustering, AUTO_RANDOM)."""

    column: ColumnDef
    primary_key: bool = False
    unique: bool = False
    clustered: bool | None = None
    auto_random: tuple[int, int] | None = None


def parse_column(node: exp.ColumnDef, session_value: Any = None) -> ParsedColumn:
    """`node` as a ColumnDef; `session_value` resolves @@variables in a DEFAULT expression."""
    name = node.name
    kind = node.args.get("kind")
    if kind is None:
        raise er.sql_error(er.PARSE, f"column '{name}' has no type")
    text = type_text(kind)
    fields: dict[str, Any] = {"name": name, "type": text}
    primary = unique = False
    clustered = auto_random = None
    default: Any = _UNSET
    for constraint in node.args.get("constraints") or []:
        option = constraint.args.get("kind")
        if isinstance(option, exp.NotNullColumnConstraint):
            fields["nullable"] = bool(option.args.get("allow_null"))
        elif isinstance(option, exp.PrimaryKeyColumnConstraint):
            primary = True
        elif isinstance(option, exp.UniqueColumnConstraint):
            unique = True
        elif isinstance(option, exp.AutoIncrementColumnConstraint):
            fields["auto_increment"] = True
        elif isinstance(option, exp.DefaultColumnConstraint):
            default = option.this
        elif isinstance(option, exp.CommentColumnConstraint):
            fields["comment"] = option.this.name
        elif isinstance(option, exp.CharacterSetColumnConstraint):
            fields["charset"] = option.this.name.lower()
        elif isinstance(option, exp.CollateColumnConstraint):
            fields["collate"] = option.this.name.lower()
        elif isinstance(option, exp.BinaryColumnConstraint):
            fields["collate"] = "utf8mb4_bin"
        elif isinstance(option, exp.ComputedColumnConstraint):
            fields["generated"] = generated_text(option.this)
            fields["generated_stored"] = bool(option.args.get("persisted"))
        elif isinstance(option, exp.GeneratedAsIdentityColumnConstraint) and option.args.get("expression") is not None:
            fields["generated"] = generated_text(option.args["expression"])
            fields["generated_stored"] = bool(option.args.get("persisted"))
        elif isinstance(option, exp.OnUpdateColumnConstraint):
            fields["on_update_now"] = True
        elif isinstance(option, exp.ZeroFillColumnConstraint):
            fields["zerofill"] = True
        elif isinstance(option, td.AutoRandom):
            shard = option.args.get("shard_bits")
            range_bits = option.args.get("range_bits")
            auto_random = (int(shard.name) if shard is not None else 5, int(range_bits.name) if range_bits is not None else 64)
        elif isinstance(option, td.Clustering):
            clustered = option.this == exp.true()
        elif isinstance(option, (exp.CheckColumnConstraint, exp.Reference, exp.InvisibleColumnConstraint)):
            if isinstance(option, exp.InvisibleColumnConstraint):
                raise er.not_supported("invisible columns")
        else:
            raise er.not_supported(f"column option {option.sql(dialect=TiDB) if option else constraint.sql(dialect=TiDB)}")
    if default is not _UNSET:
        fields["default"] = default_value(default, text, fields, session_value)
    column = ColumnDef(primary_key=primary, **fields)
    return ParsedColumn(column, primary, unique, clustered, auto_random)


def generated_text(node: exp.Expr) -> str:
    """The expression as TiDB restores it into `generated_expr_string` (names back-quoted)."""
    inner = node.this if isinstance(node, exp.Paren) else node
    return inner.sql(dialect=TiDB, identify=True)


def default_value(node: exp.Expr, type_spec: str, fields: dict, session_value: Any = None) -> Any:
    """A DEFAULT as the front keeps it: CURRENT_TIMESTAMP[(fsp)] as that text, else the value
    converted to the column's type (1067 when it cannot be)."""
    name = fields["name"]
    if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDatetime)) or (
            isinstance(node, exp.Anonymous) and node.name.upper() in ("NOW", "LOCALTIMESTAMP", "LOCALTIME")):
        fsp = node.this if isinstance(node, exp.CurrentTimestamp) else None
        return CURRENT_TIMESTAMP + (f"({fsp.name})" if fsp is not None and fsp.name not in ("", "0") else "")
    if isinstance(node, exp.Null):
        return None
    try:
        value = Compiled(node, session_value).evaluate({})
        ft = with_charset(parse_field_type(type_spec), fields.get("charset"), fields.get("collate"))
        return to_type(value, ft)
    except er.SqlError:
        raise er.sql_error(er.INVALID_DEFAULT, f"Invalid default value for '{name}'") from None


_UNSET = object()
