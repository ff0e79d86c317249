"""Compact column declarations -> TiDB FieldType/ColumnInfo, with TiDB's default lengths and flags.

Tests and workloads declare tables as `("id", "bigint", "pk")`, `("price", "decimal(10,2)")`; the
FieldType JSON produced here is what TiDB itself stores for the same DDL (docs/encoding.md#mysql-type-codes-and-column-flags),
so a replicator reading our meta keys sees the shapes a real cluster has.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.json_binary import JSON_NULL
from tidelake.codec.schema import ColumnInfo, FieldType
from tidelake.errors import InputError

UTF8MB4 = ("utf8mb4", "utf8mb4_bin")
BINARY = ("binary", "binary")

# (type code, default Flen, default Decimal, charset/collate, flag) per type keyword; values as
# TiDB's `GetDefaultFieldLengthAndDecimal` and the TableInfo JSON of real clusters show them.
_SIMPLE: dict[str, tuple[int, int, int, tuple[str, str], int]] = {
    "tinyint": (mt.TYPE_TINY, 4, 0, BINARY, 0),
    "bool": (mt.TYPE_TINY, 1, 0, BINARY, 0),
    "boolean": (mt.TYPE_TINY, 1, 0, BINARY, 0),
    "smallint": (mt.TYPE_SHORT, 6, 0, BINARY, 0),
    "mediumint": (mt.TYPE_INT24, 9, 0, BINARY, 0),
    "int": (mt.TYPE_LONG, 11, 0, BINARY, 0),
    "integer": (mt.TYPE_LONG, 11, 0, BINARY, 0),
    "bigint": (mt.TYPE_LONGLONG, 20, 0, BINARY, 0),
    "float": (mt.TYPE_FLOAT, 12, -1, BINARY, 0),
    "double": (mt.TYPE_DOUBLE, 22, -1, BINARY, 0),
    "decimal": (mt.TYPE_NEWDECIMAL, 10, 0, BINARY, 0),
    "date": (mt.TYPE_DATE, 10, 0, BINARY, mt.BINARY_FLAG),
    "datetime": (mt.TYPE_DATETIME, 19, 0, BINARY, mt.BINARY_FLAG),
    "timestamp": (mt.TYPE_TIMESTAMP, 19, 0, BINARY, mt.BINARY_FLAG),
    "time": (mt.TYPE_DURATION, 10, 0, BINARY, mt.BINARY_FLAG),
    "year": (mt.TYPE_YEAR, 4, 0, BINARY, mt.UNSIGNED_FLAG | mt.ZEROFILL_FLAG),
    "bit": (mt.TYPE_BIT, 1, 0, BINARY, mt.UNSIGNED_FLAG),
    "json": (mt.TYPE_JSON, 4294967295, 0, BINARY, mt.BINARY_FLAG),
    "char": (mt.TYPE_STRING, 1, 0, UTF8MB4, 0),
    "varchar": (mt.TYPE_VARCHAR, -1, 0, UTF8MB4, 0),
    "binary": (mt.TYPE_STRING, 1, 0, BINARY, mt.BINARY_FLAG),
    "varbinary": (mt.TYPE_VARCHAR, -1, 0, BINARY, mt.BINARY_FLAG),
    "tinytext": (mt.TYPE_TINY_BLOB, 255, 0, UTF8MB4, 0),
    "text": (mt.TYPE_BLOB, 65535, 0, UTF8MB4, 0),
    "mediumtext": (mt.TYPE_MEDIUM_BLOB, 16777215, 0, UTF8MB4, 0),
    "longtext": (mt.TYPE_LONG_BLOB, 4294967295, 0, UTF8MB4, 0),
    "tinyblob": (mt.TYPE_TINY_BLOB, 255, 0, BINARY, mt.BINARY_FLAG),
    "blob": (mt.TYPE_BLOB, 65535, 0, BINARY, mt.BINARY_FLAG),
    "mediumblob": (mt.TYPE_MEDIUM_BLOB, 16777215, 0, BINARY, mt.BINARY_FLAG),
    "longblob": (mt.TYPE_LONG_BLOB, 4294967295, 0, BINARY, mt.BINARY_FLAG),
    "vector": (mt.TYPE_TIDB_VECTOR_FLOAT32, -1, 0, BINARY, 0),
}
# A column's collation when only its charset is given (TiDB's defaults, `charset.GetDefaultCollation`).
DEFAULT_COLLATIONS = {"utf8mb4": "utf8mb4_bin", "utf8": "utf8_bin", "latin1": "latin1_bin", "ascii": "ascii_bin",
                      "binary": "binary", "gbk": "gbk_bin"}
_UNSIGNED_FLEN = {"tinyint": 3, "smallint": 5, "mediumint": 8, "int": 10, "integer": 10, "bigint": 20}
_FSP_TYPES = {"datetime", "timestamp", "time"}
_TYPE_RE = re.compile(r"^\s*([a-z]+)\s*(?:\((.*)\))?\s*(unsigned)?\s*$", re.IGNORECASE | re.DOTALL)
_QUOTED_RE = re.compile(r"'((?:[^']|'')*)'")

# Every type keyword a column declaration may use (documentation and workload generators).
TYPE_KEYWORDS = tuple(sorted(set(_SIMPLE) | {"enum", "set"}))


def parse_field_type(spec: str) -> FieldType:
    """`"decimal(10,2)"`, `"bigint unsigned"`, `"enum('a','b')"`, `"datetime(6)"` -> FieldType."""
    match = _TYPE_RE.match(spec)
    if match is None:
        raise InputError(f"column type {spec!r}: expected `name[(args)] [unsigned]`")
    name, args, unsigned = match.group(1).lower(), match.group(2), bool(match.group(3))
    if name in ("enum", "set"):
        return _enum_set_type(name, args, spec)
    if name not in _SIMPLE:
        raise InputError(f"column type {spec!r}: unknown type {name!r} (known: {', '.join(TYPE_KEYWORDS)})")
    tp, flen, decimal, (charset, collate), flag = _SIMPLE[name]
    numbers = _int_args(args, spec)
    if unsigned:
        if tp not in mt.INTEGER_TYPES | {mt.TYPE_FLOAT, mt.TYPE_DOUBLE, mt.TYPE_NEWDECIMAL}:
            raise InputError(f"column type {spec!r}: UNSIGNED only applies to numeric types")
        flag |= mt.UNSIGNED_FLAG
        flen = _UNSIGNED_FLEN.get(name, flen)
    if name in _FSP_TYPES:
        fsp = numbers[0] if numbers else 0
        if not 0 <= fsp <= 6:
            raise InputError(f"column type {spec!r}: fractional seconds precision must be 0..6")
        decimal = fsp
        flen = flen + 1 + fsp if fsp else flen
    elif name == "decimal":
        flen = numbers[0] if numbers else 10
        decimal = numbers[1] if len(numbers) > 1 else 0
        if not (1 <= flen <= 65 and 0 <= decimal <= min(30, flen)):
            raise InputError(f"column type {spec!r}: DECIMAL(M,D) needs 1<=M<=65 and 0<=D<=min(30,M)")
    elif name in ("float", "double") and len(numbers) == 2:
        flen, decimal = numbers
    elif numbers:
        flen = numbers[0]
    if name in ("varchar", "varbinary") and flen < 0:
        raise InputError(f"column type {spec!r}: {name.upper()} needs a length, e.g. {name}(64)")
    if name == "bit" and not 1 <= flen <= 64:
        raise InputError(f"column type {spec!r}: BIT(M) needs 1<=M<=64")
    return FieldType(tp=tp, flag=flag, flen=flen, decimal=decimal, charset=charset, collate=collate)


def _int_args(args: str | None, spec: str) -> list[int]:
    if not args:
        return []
    try:
        return [int(a) for a in args.split(",")]
    except ValueError as exc:
        raise InputError(f"column type {spec!r}: arguments must be integers") from exc


def _enum_set_type(name: str, args: str | None, spec: str) -> FieldType:
    elems = [e.replace("''", "'") for e in _QUOTED_RE.findall(args or "")]
    if not elems:
        raise InputError(f"column type {spec!r}: {name.upper()} needs quoted members, e.g. {name}('a','b')")
    tp = mt.TYPE_ENUM if name == "enum" else mt.TYPE_SET
    flen = max(len(e) for e in elems) if name == "enum" else len(",".join(elems))
    charset, collate = UTF8MB4
    return FieldType(tp=tp, flag=0, flen=flen, decimal=0, charset=charset, collate=collate, elems=elems)


# `default` of a column whose DEFAULT is CURRENT_TIMESTAMP: TiDB keeps that text (with its fsp).
CURRENT_TIMESTAMP = "CURRENT_TIMESTAMP"


@dataclass(frozen=True)
class ColumnDef:
    """A column as a test, a workload or a CREATE TABLE declares it; `nullable=None` means NOT NULL
    only for PK columns. `charset`/`collate` override the type's (strings only); `generated` is the
    expression text of a generated column (stored when `generated_stored`); `on_update_now` is
    ON UPDATE CURRENT_TIMESTAMP; a `default` of CURRENT_TIMESTAMP is kept as that text."""

    name: str
    type: str
    primary_key: bool = False
    nullable: bool | None = None
    default: Any = None
    auto_increment: bool = False
    unique: bool = False
    comment: str = ""
    extra: dict = field(default_factory=dict)
    charset: str | None = None
    collate: str | None = None
    generated: str = ""
    generated_stored: bool = False
    on_update_now: bool = False
    zerofill: bool = False

    @property
    def is_nullable(self) -> bool:
        return (not self.primary_key) if self.nullable is None else self.nullable


_FLAG_WORDS = {"pk", "primary key", "not null", "null", "auto_increment", "unique"}


def column_def(spec: ColumnDef | tuple) -> ColumnDef:
    """Accept a ColumnDef or a tuple `(name, type, *words, {"default": v})`; words as in _FLAG_WORDS."""
    if isinstance(spec, ColumnDef):
        return spec
    if not isinstance(spec, tuple) or len(spec) < 2 or not all(isinstance(s, str) for s in spec[:2]):
        raise InputError(f"column {spec!r}: expected (name, type, *flags) or ColumnDef")
    name, type_spec, *rest = spec
    options: dict[str, Any] = {}
    for item in rest:
        if isinstance(item, dict):
            unknown = set(item) - {"default", "comment"}
            if unknown:
                raise InputError(f"column {name!r}: unknown options {sorted(unknown)}")
            options.update(item)
            continue
        word = str(item).lower()
        if word not in _FLAG_WORDS:
            raise InputError(f"column {name!r}: unknown flag {item!r} (known: {sorted(_FLAG_WORDS)})")
        if word in ("pk", "primary key"):
            options["primary_key"] = True
        elif word == "not null":
            options["nullable"] = False
        elif word == "null":
            options["nullable"] = True
        else:
            options[word] = True
    return ColumnDef(name, type_spec, **options)


def default_json(value: Any, field_type: FieldType) -> Any:
    """A default as TiDB keeps it in ColumnInfo JSON: a string for all types (BIT goes to *_bit)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime):
        fsp = max(field_type.decimal, 0)
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        return f"{text}.{value.microsecond:06d}"[: len(text) + 1 + fsp] if fsp else text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        micros = abs(value) // timedelta(microseconds=1)
        seconds, fraction = divmod(micros, 1_000_000)
        sign = "-" if value < timedelta(0) else ""
        text = f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        fsp = max(field_type.decimal, 0)
        return f"{text}.{fraction:06d}"[: len(text) + 1 + fsp] if fsp else text
    if isinstance(value, (int, float, Decimal, str)):
        return str(value)
    if value is JSON_NULL:  # the JSON null a JSON NOT NULL column added without a default gets
        return "null"
    if isinstance(value, bytes):  # a binary string's default: Go's json.Marshal of the bytes as a string
        return value.decode("utf-8", errors="replace")
    raise InputError(f"default value {value!r}: unsupported type {type(value).__name__}")


def with_charset(ft: FieldType, charset: str | None, collate: str | None) -> FieldType:
    """A string type under another charset/collation; `CHARACTER SET binary` makes it binary."""
    if ft.tp not in mt.STRING_TYPES | {mt.TYPE_ENUM, mt.TYPE_SET} or (charset is None and collate is None):
        return ft
    if mt.is_binary_string(ft) and ft.tp in mt.STRING_TYPES:
        return ft
    if collate is not None and charset is None:
        charset = collate.split("_")[0]
    charset = charset.lower()
    if charset not in DEFAULT_COLLATIONS:
        raise InputError(f"Unknown character set: '{charset}'")
    ft.charset, ft.collate = charset, (collate or DEFAULT_COLLATIONS[charset]).lower()
    if charset == "binary" and ft.tp in mt.STRING_TYPES:
        ft.flag |= mt.BINARY_FLAG
    return ft


def build_column(defn: ColumnDef, column_id: int, offset: int) -> ColumnInfo:
    """ColumnInfo for a column created by CREATE TABLE or ADD COLUMN (state public)."""
    ft = with_charset(parse_field_type(defn.type), defn.charset, defn.collate)
    if defn.on_update_now:
        ft.flag |= mt.ON_UPDATE_NOW_FLAG
    if defn.zerofill and ft.tp in mt.INTEGER_TYPES:
        ft.flag |= mt.ZEROFILL_FLAG | mt.UNSIGNED_FLAG
    if defn.primary_key:
        ft.flag |= mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG
    if not defn.is_nullable:
        ft.flag |= mt.NOT_NULL_FLAG
    if defn.auto_increment:
        ft.flag |= mt.AUTO_INCREMENT_FLAG
    if defn.unique and not defn.primary_key:
        ft.flag |= mt.UNIQUE_KEY_FLAG
    if defn.default is None and not defn.is_nullable and not defn.auto_increment and not defn.generated:
        ft.flag |= mt.NO_DEFAULT_VALUE_FLAG
    default = defn.default if isinstance(defn.default, str) and defn.default.startswith(CURRENT_TIMESTAMP) \
        else default_json(defn.default, ft)
    default_bit = None
    if ft.tp == mt.TYPE_BIT and defn.default is not None:
        default_bit = int(defn.default).to_bytes((ft.flen + 7) // 8, "big")
        default = None
    return ColumnInfo(
        id=column_id,
        name=defn.name,
        offset=offset,
        field_type=ft,
        default=default,
        default_bit=default_bit,
        comment=defn.comment,
        generated_expr_string=defn.generated,
        generated_stored=defn.generated_stored,
    )
