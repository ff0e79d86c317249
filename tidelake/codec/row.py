"""Whole rows: decode a TiKV row value (v1 or v2) with its key's handle, and encode one as TiDB does.

Decoding follows TiCDC's mounter (docs/encoding.md#how-ticdc-decodes-a-row): value columns first, then the
handle columns from the key, then origin defaults for columns the row predates (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns).
Encoding follows TiDB's `AddRecord`/`CanSkip` (docs/encoding.md#which-columns-the-writer-stores) so the simulator writes byte-identical rows.
Owner: the codec.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.column_default import origin_default
from tidelake.codec.common_handle import (
    decode_common_handle,
    encode_common_handle,
    pk_columns,
    restorable_from_handle,
)
from tidelake.codec.json_binary import JSON_NULL
from tidelake.codec.mytime import MySQLTime, iso
from tidelake.codec.number import cmp_uint_to_int, int_to_cmp_uint
from tidelake.codec.row_v1 import parse_row_v1
from tidelake.codec.row_v2 import encode_row_v2, is_row_v2, parse_row_v2
from tidelake.codec.row_value import (
    decode_value,
    encode_value,
    value_from_datum,
    zero_value,
)
from tidelake.codec.schema import STATE_PUBLIC, ColumnInfo, FieldType, TableInfo
from tidelake.errors import InputError

EXTRA_HANDLE_NAME = "_tidb_rowid"  # column id -1, the handle of tables without a clustered PK (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)
_U64 = (1 << 64) - 1
# SchemaState write-only and write-reorganization columns are written, not yet readable (docs/encoding.md#which-columns-the-writer-stores).
_WRITABLE_STATES = frozenset({2, 3, STATE_PUBLIC})


def _is_virtual(column: ColumnInfo) -> bool:
    return column.is_generated and not column.generated_stored


def readable_columns(table: TableInfo) -> list[ColumnInfo]:
    """Public stored columns; virtual generated columns are never stored, so they are left out."""
    return [c for c in table.columns if c.state == STATE_PUBLIC and not _is_virtual(c)]


def _in_column(column: ColumnInfo, offset: int, exc: InputError) -> InputError:
    return InputError(f"column {column.name!r} (id {column.id}) value at byte {offset}: {exc}")


def _stored_values(value: bytes, table: TableInfo) -> tuple[dict[int, Any], frozenset[int]]:
    """Column id -> value for the columns present in the row, and the ids present as NULL."""
    columns = {c.id: c for c in readable_columns(table)}
    out: dict[int, Any] = {}
    if is_row_v2(value):
        row = parse_row_v2(value)
        for col_id, (start, end) in row.spans.items():
            column = columns.get(col_id)
            if column is None:
                continue
            try:
                out[col_id] = decode_value(value[start:end], column.field_type)
            except InputError as exc:
                raise _in_column(column, start, exc) from None
        return out, row.null_ids
    nulls = set()
    for col_id, (datum, offset) in parse_row_v1(value).items():
        column = columns.get(col_id)
        if column is None:
            continue
        try:
            decoded = value_from_datum(datum, column.field_type)
        except InputError as exc:
            raise _in_column(column, offset, exc) from None
        if decoded is None:
            nulls.add(col_id)
        else:
            out[col_id] = decoded
    return out, frozenset(nulls)


def _handle_values(table: TableInfo, handle: int | bytes | None) -> dict[str, Any]:
    """Values the key supplies: the int PK, the common-handle PK columns, or `_tidb_rowid`."""
    if handle is None:
        return {}
    if table.is_common_handle:
        if not isinstance(handle, (bytes, bytearray)):
            raise InputError(f"table {table.name!r} has a common handle; got int handle {handle}")
        return decode_common_handle(table, bytes(handle))
    if not isinstance(handle, int):
        raise InputError(f"table {table.name!r} has int handles; got {len(handle)} handle bytes")
    pk = table.handle_column()
    if pk is None:
        return {EXTRA_HANDLE_NAME: handle}
    # docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns: DecodeHandleToDatumMap gives uint64(h) for UNSIGNED columns
    return {pk.name: handle & _U64 if mt.is_unsigned(pk.field_type.flag) else handle}


def missing_value(column: ColumnInfo) -> Any:
    """docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns: origin_default, else NULL if nullable, else the type's zero value."""
    default = origin_default(column)
    if default is not None:
        return default
    if not mt.is_not_null(column.field_type.flag):
        return None
    return zero_value(column.field_type)


def decode_row(value: bytes, table: TableInfo, handle: int | bytes | None = None) -> dict[str, Any]:
    """Column name -> value for one row value of `table` (v1 or v2, docs/encoding.md#telling-v1-from-v2).

    `handle` is the decoded key handle (keys.decode_record_key). Without it, the columns that
    only the key holds (the int PK, common-handle PK columns left out of the value) are absent
    from the result. Tables without a clustered PK also get `_tidb_rowid` when it is given.
    """
    if not value:
        raise InputError("row value is empty: there is no row (a delete, or the old value of an insert)")
    stored, nulls = _stored_values(value, table)
    from_key = _handle_values(table, handle)
    pk = table.handle_column()
    result: dict[str, Any] = {}
    for column in sorted(readable_columns(table), key=lambda c: c.offset):
        if pk is not None and column.id == pk.id:
            if column.name in from_key:
                result[column.name] = from_key[column.name]
        elif column.id in stored:
            result[column.name] = stored[column.id]
        elif column.id in nulls:
            result[column.name] = None
        elif column.name in from_key:
            result[column.name] = from_key[column.name]
        elif table.is_common_handle and _is_pk_column(table, column) and handle is None:
            continue
        else:
            result[column.name] = missing_value(column)
    if EXTRA_HANDLE_NAME in from_key:
        result[EXTRA_HANDLE_NAME] = from_key[EXTRA_HANDLE_NAME]
    return result


def _is_pk_column(table: TableInfo, column: ColumnInfo) -> bool:
    return any(col.id == column.id for col, _ in pk_columns(table))


def _skipped_by_tidb(table: TableInfo, column: ColumnInfo, value: Any, new_collation: bool) -> bool:
    """TiDB's `CanSkip` (docs/encoding.md#which-columns-the-writer-stores): columns it leaves out of the row value entirely."""
    pk = table.handle_column()
    if pk is not None and column.id == pk.id:
        return True
    if table.is_common_handle:
        for col, index_column in pk_columns(table):
            if col.id == column.id:
                return restorable_from_handle(index_column, column, new_collation)
    if value is None and column.default is None and column.origin_default is None and column.default_bit is None:
        return True
    return _is_virtual(column)


def encode_row(table: TableInfo, values: Mapping[str, Any], new_collation: bool = True) -> bytes:
    """The row-v2 value TiDB writes for `values` (column name -> value), byte for byte.

    Write-only columns (mid ADD COLUMN) get their origin default, as TiDB writes them. A
    nullable column missing from `values` is NULL; a missing NOT NULL column is an error.
    `new_collation` is the cluster's new_collation_enabled (default on since TiDB 6.0).
    """
    columns: dict[int, bytes | None] = {}
    for column in table.columns:
        if column.state not in _WRITABLE_STATES:
            continue
        if column.state != STATE_PUBLIC:
            value = origin_default(column)
        elif column.name in values:
            value = values[column.name]
        elif _is_virtual(column) or not mt.is_not_null(column.field_type.flag):
            value = None
        else:
            raise InputError(f"no value for NOT NULL column {column.name!r}")
        if _skipped_by_tidb(table, column, value, new_collation):
            continue
        try:
            columns[column.id] = None if value is None else encode_value(value, column.field_type)
        except InputError as exc:
            raise InputError(f"column {column.name!r}: {exc}") from None
    return encode_row_v2(columns)


def row_handle(table: TableInfo, values: Mapping[str, Any], new_collation: bool = True) -> int | bytes | None:
    """The key handle TiDB derives from a row: the int PK (UNSIGNED stored as its int64 bit
    pattern, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns), the encoded common handle, or None when TiDB allocates a `_tidb_rowid`."""
    if table.is_common_handle:
        return encode_common_handle(table, values, new_collation)
    pk = table.handle_column()
    if pk is None:
        return None
    value = values.get(pk.name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"integer primary key {pk.name!r} needs an int value, got {value!r}")
    if mt.is_unsigned(pk.field_type.flag):
        if not 0 <= value <= _U64:
            raise InputError(f"UNSIGNED primary key {pk.name!r} value {value} out of range")
        return cmp_uint_to_int(value ^ (1 << 63))
    int_to_cmp_uint(value)  # int64 range check
    return value


def jsonable(value: Any, field_type: FieldType | None) -> Any:
    """A JSON-safe form of a decoded value for CLI output.

    Decimals -> exact strings; DATE/DATETIME/TIMESTAMP -> ISO-8601 (TIMESTAMP with +00:00);
    TIME -> [-]HH:MM:SS[.f]; binary strings -> base64; JSON columns -> the JSON value;
    ENUM/SET -> their strings; BIT -> int; NaN/Infinity -> their names as strings.
    """
    fsp = max(field_type.decimal, 0) if field_type is not None else None
    if value is None or value is JSON_NULL:
        return None
    if isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, MySQLTime):
        return value.text(fsp or 0)
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds" if fsp or value.microsecond else "seconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return iso(value, fsp)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {str(k): jsonable(v, None) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v, None) for v in value]
    return str(value)
