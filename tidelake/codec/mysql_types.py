"""MySQL/TiDB column type codes and FieldType flag bits, as stored in TiDB's schema JSON.

Values are those of pingcap/tidb `pkg/parser/mysql/type.go` (docs/encoding.md#mysql-type-codes-and-column-flags).
Owner: the codec.
"""

from typing import Protocol

# docs/encoding.md#mysql-type-codes-and-column-flags — type codes (FieldType.Tp)
TYPE_UNSPECIFIED = 0
TYPE_TINY = 1
TYPE_SHORT = 2
TYPE_LONG = 3
TYPE_FLOAT = 4
TYPE_DOUBLE = 5
TYPE_NULL = 6
TYPE_TIMESTAMP = 7
TYPE_LONGLONG = 8
TYPE_INT24 = 9
TYPE_DATE = 10
TYPE_DURATION = 11
TYPE_DATETIME = 12
TYPE_YEAR = 13
TYPE_NEWDATE = 14
TYPE_VARCHAR = 15
TYPE_BIT = 16
TYPE_TIDB_VECTOR_FLOAT32 = 225
TYPE_JSON = 245
TYPE_NEWDECIMAL = 246
TYPE_ENUM = 247
TYPE_SET = 248
TYPE_TINY_BLOB = 249
TYPE_MEDIUM_BLOB = 250
TYPE_LONG_BLOB = 251
TYPE_BLOB = 252
TYPE_VAR_STRING = 253
TYPE_STRING = 254
TYPE_GEOMETRY = 255

TYPE_NAMES: dict[int, str] = {
    TYPE_UNSPECIFIED: "unspecified",
    TYPE_TINY: "tinyint",
    TYPE_SHORT: "smallint",
    TYPE_LONG: "int",
    TYPE_FLOAT: "float",
    TYPE_DOUBLE: "double",
    TYPE_NULL: "null",
    TYPE_TIMESTAMP: "timestamp",
    TYPE_LONGLONG: "bigint",
    TYPE_INT24: "mediumint",
    TYPE_DATE: "date",
    TYPE_DURATION: "time",
    TYPE_DATETIME: "datetime",
    TYPE_YEAR: "year",
    TYPE_NEWDATE: "newdate",
    TYPE_VARCHAR: "varchar",
    TYPE_BIT: "bit",
    TYPE_TIDB_VECTOR_FLOAT32: "vector",
    TYPE_JSON: "json",
    TYPE_NEWDECIMAL: "decimal",
    TYPE_ENUM: "enum",
    TYPE_SET: "set",
    TYPE_TINY_BLOB: "tinyblob",
    TYPE_MEDIUM_BLOB: "mediumblob",
    TYPE_LONG_BLOB: "longblob",
    TYPE_BLOB: "blob",
    TYPE_VAR_STRING: "var_string",
    TYPE_STRING: "char",
    TYPE_GEOMETRY: "geometry",
}

INTEGER_TYPES = frozenset({TYPE_TINY, TYPE_SHORT, TYPE_INT24, TYPE_LONG, TYPE_LONGLONG})
TIME_TYPES = frozenset({TYPE_DATE, TYPE_DATETIME, TYPE_TIMESTAMP, TYPE_NEWDATE})
BLOB_TYPES = frozenset({TYPE_TINY_BLOB, TYPE_MEDIUM_BLOB, TYPE_LONG_BLOB, TYPE_BLOB})
# Types whose row-v2 value is the raw bytes of a string (docs/encoding.md#value-bytes-per-column-type).
STRING_TYPES = frozenset({TYPE_VARCHAR, TYPE_VAR_STRING, TYPE_STRING}) | BLOB_TYPES

# docs/encoding.md#mysql-type-codes-and-column-flags — FieldType.Flag bits
NOT_NULL_FLAG = 1
PRI_KEY_FLAG = 2
UNIQUE_KEY_FLAG = 4
MULTIPLE_KEY_FLAG = 8
BLOB_FLAG = 16
UNSIGNED_FLAG = 32
ZEROFILL_FLAG = 64
BINARY_FLAG = 128
ENUM_FLAG = 256
AUTO_INCREMENT_FLAG = 512
TIMESTAMP_FLAG = 1024
SET_FLAG = 2048
NO_DEFAULT_VALUE_FLAG = 4096
ON_UPDATE_NOW_FLAG = 8192
PART_KEY_FLAG = 16384
NUM_FLAG = 32768
GROUP_FLAG = 32768
GENERATED_COLUMN_FLAG = 1 << 23

BINARY_CHARSET = "binary"


class HasStringType(Protocol):
    """What `is_binary_string` needs from a FieldType (kept structural to avoid an import cycle)."""

    tp: int
    charset: str
    collate: str


def is_unsigned(flag: int) -> bool:
    """UNSIGNED decides signed vs unsigned decoding of row-v2 integers (docs/encoding.md#decoder-checklist)."""
    return bool(flag & UNSIGNED_FLAG)


def is_not_null(flag: int) -> bool:
    return bool(flag & NOT_NULL_FLAG)


def is_binary_string(field_type: HasStringType) -> bool:
    """True for BINARY/VARBINARY/BLOB: string types whose charset/collation is `binary` (docs/encoding.md#mysql-type-codes-and-column-flags).

    Numeric types also carry charset `binary` in TiDB's JSON, so the type code is checked too.
    """
    if field_type.tp not in STRING_TYPES:
        return False
    return field_type.charset == BINARY_CHARSET or field_type.collate == BINARY_CHARSET
