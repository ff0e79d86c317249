"""The MySQL -> Spark type mapping of replica tables (docs/design.md#lake-layout), kept as ONE table.

`TYPE_MAPPING` is the single source: `spark_type` picks the first row whose condition holds,
`type_mapping_markdown` renders the same rows for the README, and `spark_value` converts the
codec's Python values to what Spark/Arrow expects for the chosen type. Every mapping is lossless
except MySQL zero dates, which have no Spark DATE/TIMESTAMP value and become NULL (documented row).
Owner: the codec; the merge's replica schema (tidelake.merge.replica_schema) follows it.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

from tidelake.codec.json_binary import json_text_from_value
from tidelake.codec.mysql_types import (
    TYPE_BIT,
    TYPE_BLOB,
    TYPE_DATE,
    TYPE_DATETIME,
    TYPE_DOUBLE,
    TYPE_DURATION,
    TYPE_ENUM,
    TYPE_FLOAT,
    TYPE_GEOMETRY,
    TYPE_INT24,
    TYPE_JSON,
    TYPE_LONG,
    TYPE_LONG_BLOB,
    TYPE_LONGLONG,
    TYPE_MEDIUM_BLOB,
    TYPE_NAMES,
    TYPE_NEWDATE,
    TYPE_NEWDECIMAL,
    TYPE_SET,
    TYPE_SHORT,
    TYPE_STRING,
    TYPE_TIDB_VECTOR_FLOAT32,
    TYPE_TIMESTAMP,
    TYPE_TINY,
    TYPE_TINY_BLOB,
    TYPE_VAR_STRING,
    TYPE_VARCHAR,
    TYPE_YEAR,
    is_binary_string,
    is_unsigned,
)
from tidelake.codec.mytime import MySQLTime, duration_to_nanos
from tidelake.codec.schema import FieldType
from tidelake.errors import InputError

SPARK_MAX_DECIMAL_PRECISION = 38
_STRING_TYPES = {TYPE_VARCHAR, TYPE_VAR_STRING, TYPE_STRING, TYPE_TINY_BLOB, TYPE_MEDIUM_BLOB, TYPE_LONG_BLOB, TYPE_BLOB}
_EXACT = Context(prec=200, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class TypeMapping:
    """One row of the mapping table: when it applies and which Spark type it yields."""

    mysql: str
    condition: str
    spark: str
    note: str
    applies: Callable[[FieldType], bool]
    resolve: Callable[[FieldType], str]


def _is(tp: int, unsigned: bool | None = None) -> Callable[[FieldType], bool]:
    def check(ft: FieldType) -> bool:
        return ft.tp == tp and (unsigned is None or is_unsigned(ft.flag) == unsigned)

    return check


def _const(spark: str) -> Callable[[FieldType], str]:
    return lambda ft: spark


def _decimal_fits(ft: FieldType) -> bool:
    return 0 < ft.flen <= SPARK_MAX_DECIMAL_PRECISION and 0 <= ft.decimal <= ft.flen


def _bit_width(ft: FieldType) -> int:
    return ft.flen if ft.flen > 0 else 1  # BIT means BIT(1)


TYPE_MAPPING: list[TypeMapping] = [
    TypeMapping("TINYINT", "signed", "TINYINT", "", _is(TYPE_TINY, False), _const("TINYINT")),
    TypeMapping("TINYINT", "UNSIGNED", "SMALLINT", "0..255", _is(TYPE_TINY, True), _const("SMALLINT")),
    TypeMapping("SMALLINT", "signed", "SMALLINT", "", _is(TYPE_SHORT, False), _const("SMALLINT")),
    TypeMapping("SMALLINT", "UNSIGNED", "INT", "0..65535", _is(TYPE_SHORT, True), _const("INT")),
    TypeMapping("MEDIUMINT", "signed or UNSIGNED", "INT", "24-bit values fit", _is(TYPE_INT24), _const("INT")),
    TypeMapping("INT", "signed", "INT", "", _is(TYPE_LONG, False), _const("INT")),
    TypeMapping("INT", "UNSIGNED", "BIGINT", "0..4294967295", _is(TYPE_LONG, True), _const("BIGINT")),
    TypeMapping("BIGINT", "signed", "BIGINT", "", _is(TYPE_LONGLONG, False), _const("BIGINT")),
    TypeMapping(
        "BIGINT", "UNSIGNED", "DECIMAL(20,0)", "values above 2^63-1 fit", _is(TYPE_LONGLONG, True), _const("DECIMAL(20,0)")
    ),
    TypeMapping("FLOAT", "", "FLOAT", "stored as float64 by TiDB, narrowed back", _is(TYPE_FLOAT), _const("FLOAT")),
    TypeMapping("DOUBLE", "", "DOUBLE", "", _is(TYPE_DOUBLE), _const("DOUBLE")),
    TypeMapping(
        "DECIMAL(p,s)",
        "p <= 38",
        "DECIMAL(p,s)",
        "exact",
        lambda ft: ft.tp == TYPE_NEWDECIMAL and _decimal_fits(ft),
        lambda ft: f"DECIMAL({ft.flen},{ft.decimal})",
    ),
    TypeMapping(
        "DECIMAL(p,s)",
        "p > 38 (or unspecified)",
        "STRING",
        "exact decimal text, e.g. '-12345.6700'; Spark decimals stop at 38 digits",
        _is(TYPE_NEWDECIMAL),
        _const("STRING"),
    ),
    TypeMapping(
        "BIT(n)", "n <= 63", "BIGINT", "the bits as an unsigned number", lambda ft: ft.tp == TYPE_BIT and _bit_width(ft) <= 63,
        _const("BIGINT"),
    ),
    TypeMapping("BIT(n)", "n = 64", "DECIMAL(20,0)", "unsigned 64-bit number", _is(TYPE_BIT), _const("DECIMAL(20,0)")),
    TypeMapping("YEAR", "", "SMALLINT", "0 or 1901..2155", _is(TYPE_YEAR), _const("SMALLINT")),
    TypeMapping(
        "DATE", "", "DATE", "zero or partial dates ('0000-00-00', '2020-00-15') become NULL",
        lambda ft: ft.tp in (TYPE_DATE, TYPE_NEWDATE), _const("DATE"),
    ),
    TypeMapping(
        "DATETIME(fsp)", "", "TIMESTAMP_NTZ", "wall-clock time, no zone; zero dates become NULL", _is(TYPE_DATETIME),
        _const("TIMESTAMP_NTZ"),
    ),
    TypeMapping(
        "TIMESTAMP(fsp)", "", "TIMESTAMP", "UTC instant (TiDB stores TIMESTAMP in UTC); zero becomes NULL",
        _is(TYPE_TIMESTAMP), _const("TIMESTAMP"),
    ),
    TypeMapping(
        "TIME(fsp)", "", "BIGINT", "signed microseconds (-838:59:59..838:59:59 exceeds Spark's TIME; "
        "Delta has no interval type)", _is(TYPE_DURATION), _const("BIGINT"),
    ),
    TypeMapping(
        "BINARY / VARBINARY / BLOB", "charset binary", "BINARY", "raw bytes",
        lambda ft: ft.tp in _STRING_TYPES and is_binary_string(ft), _const("BINARY"),
    ),
    TypeMapping(
        "CHAR / VARCHAR / TEXT", "non-binary charset", "STRING", "", lambda ft: ft.tp in _STRING_TYPES, _const("STRING")
    ),
    TypeMapping("ENUM", "", "STRING", "the member text ('' for the invalid value 0)", _is(TYPE_ENUM), _const("STRING")),
    TypeMapping("SET", "", "STRING", "members joined by ','", _is(TYPE_SET), _const("STRING")),
    TypeMapping("JSON", "", "STRING", "TiDB's canonical JSON text", _is(TYPE_JSON), _const("STRING")),
    TypeMapping(
        "VECTOR(d)", "TiDB vector", "ARRAY<FLOAT>", "float32 elements", _is(TYPE_TIDB_VECTOR_FLOAT32), _const("ARRAY<FLOAT>")
    ),
    TypeMapping("GEOMETRY", "", "BINARY", "stored bytes as-is", _is(TYPE_GEOMETRY), _const("BINARY")),
]


def _mapping_for(field_type: FieldType) -> TypeMapping:
    for row in TYPE_MAPPING:
        if row.applies(field_type):
            return row
    name = TYPE_NAMES.get(field_type.tp, "unknown")
    raise InputError(f"no Spark type for MySQL type code {field_type.tp} ({name})")


def spark_type(field_type: FieldType) -> str:
    """Spark DDL type string (e.g. 'DECIMAL(20,0)', 'TIMESTAMP_NTZ') for a column's FieldType."""
    return _mapping_for(field_type).resolve(field_type)


def type_mapping_markdown() -> str:
    """The mapping table as Markdown, for the README."""
    lines = ["| MySQL / TiDB type | Condition | Spark type | Note |", "|---|---|---|---|"]
    lines += [f"| {r.mysql} | {r.condition} | {r.spark} | {r.note} |" for r in TYPE_MAPPING]
    return "\n".join(lines) + "\n"


def _expect(value: Any, kinds: type | tuple[type, ...], field_type: FieldType) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is int):
        name = TYPE_NAMES.get(field_type.tp, str(field_type.tp))
        raise InputError(f"value {value!r} ({type(value).__name__}) does not belong to a {name} column")


def spark_value(value: Any, field_type: FieldType) -> Any:
    """Convert a decoded value (the codec's Python value model) to the Python value Spark/Arrow expects."""
    if value is None:
        return None
    return spark_converter(field_type)(value)


def spark_converter(field_type: FieldType) -> Callable[[Any], Any]:
    """`spark_value` for one column type with the mapping resolved once: decoders convert many
    values of one column, and finding the mapping row costs more than most conversions. The
    returned function takes a non-NULL value."""
    spark = spark_type(field_type)
    tp = field_type.tp

    def expect(kinds: type | tuple[type, ...]) -> Callable[[Any], Any]:
        def check(value: Any) -> Any:
            _expect(value, kinds, field_type)
            return value

        return check

    if tp == TYPE_NEWDECIMAL:
        decimal = expect(Decimal)
        if spark == "STRING":
            return lambda value: format(decimal(value), "f")
        return lambda value: _fit_decimal(decimal(value), field_type.flen, field_type.decimal)
    if spark == "DECIMAL(20,0)":
        integer = expect(int)
        return lambda value: Decimal(integer(value))
    if tp in (TYPE_DATE, TYPE_NEWDATE, TYPE_DATETIME, TYPE_TIMESTAMP):
        return lambda value: _time_value(value, field_type)
    if tp == TYPE_DURATION:
        duration = expect(timedelta)
        return lambda value: duration_to_nanos(duration(value)) // 1000
    if tp == TYPE_JSON:
        return json_text_from_value
    if tp == TYPE_TIDB_VECTOR_FLOAT32:
        sequence = expect((list, tuple))
        return lambda value: [float(v) for v in sequence(value)]
    if spark == "BINARY":
        raw = expect((bytes, bytearray, memoryview))
        return lambda value: bytes(raw(value))
    if spark == "STRING":
        return expect(str)
    if spark in ("FLOAT", "DOUBLE"):
        number = expect((float, int))
        return lambda value: float(number(value))
    return expect(int)


def _fit_decimal(value: Decimal, precision: int, scale: int) -> Decimal:
    """Scale to the column's decimals half-up, as TiDB's own chunk decoder does (docs/encoding.md#decoder-checklist)."""
    scaled = value.quantize(Decimal(1).scaleb(-scale), context=_EXACT)
    if scaled.adjusted() >= precision - scale:
        raise InputError(f"decimal {value} does not fit DECIMAL({precision},{scale})")
    return scaled


def _time_value(value: Any, field_type: FieldType) -> date | datetime | None:
    if isinstance(value, MySQLTime):
        return None
    if field_type.tp in (TYPE_DATE, TYPE_NEWDATE):
        if isinstance(value, datetime) or not isinstance(value, date):
            raise InputError(f"value {value!r} ({type(value).__name__}) does not belong to a DATE column")
        return value
    _expect(value, datetime, field_type)
    if field_type.tp == TYPE_TIMESTAMP:
        if value.tzinfo is None:
            raise InputError(f"TIMESTAMP value {value} has no timezone; the codec yields UTC-aware datetimes")
        return value.astimezone(timezone.utc)
    if value.tzinfo is not None:
        raise InputError(f"DATETIME value {value} carries a timezone; DATETIME is wall-clock time")
    return value
