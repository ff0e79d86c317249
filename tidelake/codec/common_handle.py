"""Common handles: the row key suffix of clustered tables whose PK is not a single integer.

The handle is `EncodeKey(pk columns...)` in primary-index order (docs/encoding.md#record-row-key, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns).
Columns whose key form loses information (prefix columns, strings stored as collation sort keys
that need restored data) are also kept in the row value, and `decode_row` prefers that copy.
Owner: the codec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.datum import NIL_FLAG, Datum, decode_datum
from tidelake.codec.keys import pad_common_handle
from tidelake.codec.row_value import encode_key_datum, value_from_datum
from tidelake.codec.schema import (
    UNSPECIFIED_LENGTH,
    ColumnInfo,
    FieldType,
    IndexColumn,
    TableInfo,
)
from tidelake.errors import InputError

_NO_PAD_BIN_COLLATION = "utf8mb4_0900_bin"


def pk_columns(table: TableInfo) -> list[tuple[ColumnInfo, IndexColumn]]:
    """PK columns in primary-index order, paired with their index column (for the prefix length)."""
    index = table.primary_index()
    if not table.is_common_handle or index is None:
        raise InputError(f"table {table.name!r} has no clustered common-handle primary key")
    return [(table.columns[ic.offset], ic) for ic in index.columns]


def needs_restored_data(ft: FieldType, new_collation: bool) -> bool:
    """`types.NeedRestoredData` (docs/encoding.md#which-columns-the-writer-stores): the key holds a sort key, not the string."""
    if not new_collation or ft.tp not in mt.STRING_TYPES or mt.is_binary_string(ft):
        return False
    is_bin = ft.collate.endswith("_bin")
    is_varchar = ft.tp in (mt.TYPE_VARCHAR, mt.TYPE_VAR_STRING)
    return (not is_bin or is_varchar) and ft.collate != _NO_PAD_BIN_COLLATION


def restorable_from_handle(index_column: IndexColumn, column: ColumnInfo, new_collation: bool) -> bool:
    """TiDB's `CanSkip` for common-handle columns: full length and no restored data needed."""
    return index_column.length == UNSPECIFIED_LENGTH and not needs_restored_data(column.field_type, new_collation)


def _truncate(value: Any, index_column: IndexColumn, ft: FieldType) -> Any:
    """`TruncateIndexValue`: prefix index columns keep `length` characters (bytes if binary)."""
    if index_column.length == UNSPECIFIED_LENGTH or not isinstance(value, (str, bytes)):
        return value
    return value[: index_column.length]


def encode_common_handle(table: TableInfo, values: Mapping[str, Any], new_collation: bool = True) -> bytes:
    """Encoded (and 9-byte padded) handle for a row of a clustered common-handle table."""
    out = bytearray()
    for column, index_column in pk_columns(table):
        if values.get(column.name) is None:
            raise InputError(f"primary key column {column.name!r} has no value")
        value = _truncate(values[column.name], index_column, column.field_type)
        out += encode_key_datum(value, column.field_type, new_collation)
    return pad_common_handle(bytes(out))


def split_common_handle(handle: bytes) -> list[Datum]:
    """Datums of an encoded handle, stopping at the zero padding (`kv.NewCommonHandle`)."""
    out = []
    pos = 0
    while pos < len(handle) and handle[pos] != NIL_FLAG:
        datum, pos = decode_datum(handle, pos)
        out.append(datum)
    return out


def decode_common_handle(table: TableInfo, handle: bytes) -> dict[str, Any]:
    """Values of the PK columns as far as the key holds them: every column, in key form.

    Prefix columns come back truncated and sort-key strings as their sort key; `decode_row`
    uses these only for columns TiDB left out of the row value.
    """
    columns = pk_columns(table)
    datums = split_common_handle(handle)
    if len(datums) != len(columns):
        raise InputError(
            f"common handle holds {len(datums)} values, but the primary key of {table.name!r} has {len(columns)} columns"
        )
    return {col.name: value_from_datum(d, col.field_type) for (col, _), d in zip(columns, datums)}
