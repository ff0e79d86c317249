"""Row values -> Spark values, compiled once per table schema: the hot loop of bootstrap and merge.

`CompiledRowDecoder` gives exactly what the reference `decode_row` + `spark_value` give, faster:
a plan per row-v2 header shape, compiled to one function. Anything it does not take falls back
to `decode_row`, which gives the value or raises: the fast path never decides alone that a row is
bad. Owner: the codec.

More: docs/internals.md#compiled_row.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.common_handle import decode_common_handle, pk_columns
from tidelake.codec.decimal import MAX_BIN_PRECISION, decimal_bin_decoder, decimal_bin_size
from tidelake.codec.mytime import MAX_FSP, unpack_time
from tidelake.codec.row import missing_value, readable_columns, decode_row
from tidelake.codec.row_v2 import CODEC_VER, FLAG_LARGE, HEADER_LEN
from tidelake.codec.row_value import decode_value
from tidelake.codec.schema import ColumnInfo, FieldType, TableInfo
from tidelake.codec.spark_types import spark_converter, spark_type

Converter = Callable[[Any], Any]
# docs/encoding.md#value-bytes-per-column-type: compact integers are 1, 2, 4 or 8 bytes, little-endian
_SIGNED = {n: struct.Struct("<" + c).unpack for n, c in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))}
_UNSIGNED = {n: struct.Struct("<" + c).unpack for n, c in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))}
# Distinct (present, NULL) column sets compiled per decoder. TiDB leaves a NULL out of the row
# when the column has no default (docs/encoding.md#which-columns-the-writer-stores), so a table with many optional columns
# can give almost every row its own header: past this many, rows with a new header go to the
# reference decoder (a compile costs far more than a reference decode, and a plan is held per header).
_MAX_PLANS = 64


class _Fallback(Exception):
    """The fast path does not take this row; the reference decoder will."""


def _signed(data: bytes) -> int:
    return _SIGNED[len(data)](data)[0]


def _unsigned(data: bytes) -> int:
    return _UNSIGNED[len(data)](data)[0]


def _binary(data: bytes) -> bytes:
    return data


def _then(read: Converter, to_spark: Converter) -> Converter:
    return lambda data: to_spark(read(data))


def value_converter(field_type: FieldType) -> Converter:
    """Row v2 data-area bytes of a not-NULL value -> its Spark value (may raise on bad bytes)."""
    tp = field_type.tp
    spark = spark_type(field_type)
    to_spark = spark_converter(field_type)
    if tp in mt.INTEGER_TYPES or tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        signed = tp == mt.TYPE_YEAR or (tp != mt.TYPE_BIT and not mt.is_unsigned(field_type.flag))
        read = _signed if signed else _unsigned
        return _then(read, to_spark) if spark.startswith("DECIMAL") else read
    if tp in mt.STRING_TYPES:
        return _binary if mt.is_binary_string(field_type) else bytes.decode
    if tp == mt.TYPE_NEWDECIMAL and 1 <= field_type.flen <= MAX_BIN_PRECISION and 0 <= field_type.decimal <= field_type.flen:
        return _decimal(field_type, to_spark, spark.startswith("DECIMAL"))
    fsp = max(field_type.decimal, 0)  # as row_value reads packed times
    if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP) and fsp <= MAX_FSP:
        return lambda data: to_spark(unpack_time(_unsigned(data), tp, fsp))
    return lambda data: to_spark(decode_value(data, field_type))


def _decimal(field_type: FieldType, to_spark: Converter, fits: bool) -> Converter:
    """A DECIMAL value as TiDB writes it for this column: `precision frac` bytes equal to the
    column's (Length/Frac come from the column, docs/encoding.md#mydecimal-binary-format), then the MyDecimal. Its
    digits then fit the Spark DECIMAL(p,s) as they are: `_fit_decimal` would change nothing."""
    precision, frac = field_type.flen, field_type.decimal
    read = decimal_bin_decoder(precision, frac)
    length = 2 + decimal_bin_size(precision, frac)

    def convert(data: bytes) -> Any:
        if len(data) != length or data[0] != precision or data[1] != frac:
            return to_spark(decode_value(data, field_type))
        value = read(data, 2)[0]
        return value if fits else to_spark(value)

    return convert


class CompiledRowDecoder:
    """Spark values of `columns` for row values of one table schema (see module doc)."""

    def __init__(self, table: TableInfo, columns: Sequence[ColumnInfo]) -> None:
        self.table = table
        self.columns = list(columns)
        self.fallbacks = 0  # rows the reference decoder took: bad bytes, rare types, new headers past _MAX_PLANS
        self._to_spark = [spark_converter(c.field_type) for c in self.columns]
        self._from_bytes = [value_converter(c.field_type) for c in self.columns]
        self._readable = {c.id for c in readable_columns(table)}
        pk = table.handle_column()
        self._pk_slot = next((i for i, c in enumerate(self.columns) if pk is not None and c.id == pk.id), None)
        self._pk_unsigned = pk is not None and mt.is_unsigned(pk.field_type.flag)
        # an int PK's Spark type is an integer (kept as is) or, for BIGINT UNSIGNED, DECIMAL(20,0)
        self._pk_decimal = self._pk_slot is not None and spark_type(pk.field_type).startswith("DECIMAL")
        self._plans: dict[bytes, Callable[[bytes, int | bytes], list[Any]]] = {}

    def spark_row(self, value: bytes, handle: int | bytes | None) -> list[Any]:
        """The output row: equal to the reference, `[spark_value(decode_row(value, table,
        handle).get(c.name), c.field_type) for c in columns]`, and raising what it raises."""
        try:
            return self._fast(value, handle)
        except Exception:  # noqa: BLE001 - any doubt goes to the reference, which decides
            self.fallbacks += 1
        row = decode_row(value, self.table, handle)
        return [None if (v := row.get(c.name)) is None else conv(v) for c, conv in zip(self.columns, self._to_spark)]

    def _fast(self, value: bytes, handle: int | bytes | None) -> list[Any]:
        if value[0] != CODEC_VER or handle is None:
            raise _Fallback
        width = 4 if value[1] & FLAG_LARGE else 1
        header = value[:HEADER_LEN + ((value[2] | value[3] << 8) + (value[4] | value[5] << 8)) * width]
        row = self._plans.get(header)
        if row is None:
            if len(self._plans) >= _MAX_PLANS:
                raise _Fallback
            row = self._plan(header, width)
        return row(value, handle)

    def _plan(self, header: bytes, width: int) -> Callable[[bytes, int | bytes], list[Any]]:
        """decode_row's choice for every output column, for rows with this header (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns, docs/encoding.md#how-ticdc-decodes-a-row): the int PK from the key; a stored value; NULL; a common-handle column from the
        key; else the column's missing value. Compiled to one Python function: the slots, bounds
        and constants are literals there, so a row costs one call and no loop. Its source holds
        only generated names and numbers; converters, constants and column names are bound in its
        namespace."""
        n_not_null, n_null = struct.unpack_from("<HH", header, 2)
        ids = struct.unpack_from(f"<{n_not_null + n_null}{'I' if width == 4 else 'B'}", header, HEADER_LEN)
        if len(header) != HEADER_LEN + len(ids) * width:
            raise _Fallback
        position = {col_id: k for k, col_id in enumerate(ids[:n_not_null])}  # the last one wins, as in parse_row_v2
        nulls = set(ids[n_not_null:])
        in_key = {c.id for c, _ in pk_columns(self.table)} if self.table.is_common_handle else set()
        ends_at = len(header)
        data = ends_at + n_not_null * (4 if width == 4 else 2)  # end offsets are uint32 / uint16 (docs/encoding.md#layout)
        names: dict[str, Any] = {"_Fallback": _Fallback, "_ends": struct.Struct(f"<{n_not_null}{'I' if width == 4 else 'H'}").unpack_from,
                                 "_decode_value": decode_value, "_key_values": decode_common_handle, "_table": self.table}

        def stored(k: int) -> str:
            return f"value[{data} + {f'e{k - 1}' if k else 0}:{data} + e{k}]"

        lines = ["def row(value, handle):"]
        if n_not_null:
            ends = ", ".join(f"e{k}" for k in range(n_not_null))
            lines += [f"    {ends}, = _ends(value, {ends_at})",
                      f"    if not 0 <= {' <= '.join(f'e{k}' for k in range(n_not_null))} or {data} + e{n_not_null - 1} > len(value):",
                      "        raise _Fallback"]
        # stored values no output takes (an int PK TiDB did not skip, a column left out of the
        # output): decode_row decodes them, so a bad one is its error too
        output_ids = {c.id for slot, c in enumerate(self.columns) if slot != self._pk_slot}
        for c in readable_columns(self.table):
            if c.id in position and c.id not in output_ids:
                names[f"_type{c.id}"] = c.field_type
                lines.append(f"    _decode_value({stored(position[c.id])}, _type{c.id})")
        if self.table.is_common_handle:
            lines += ["    if type(handle) is not bytes:", "        raise _Fallback", "    key = _key_values(_table, handle)"]
        else:
            lines += ["    if type(handle) is not int:", "        raise _Fallback"]
        slots = []
        for slot, column in enumerate(self.columns):
            names[f"_convert{slot}"] = self._from_bytes[slot]
            names[f"_to_spark{slot}"] = self._to_spark[slot]
            names[f"_name{slot}"] = column.name
            if slot == self._pk_slot:
                pk = "(handle & 0xFFFFFFFFFFFFFFFF)" if self._pk_unsigned else "handle"
                slots.append(f"_to_spark{slot}({pk})" if self._pk_decimal else pk)
            elif column.id not in self._readable or column.id in nulls and column.id not in position:
                slots.append("None")
            elif column.id in position:
                slots.append(f"_convert{slot}({stored(position[column.id])})")
            elif column.id in in_key:
                slots.append(f"(None if (v := key[_name{slot}]) is None else _to_spark{slot}(v))")
            else:
                missing = missing_value(column)
                names[f"_missing{slot}"] = None if missing is None else self._to_spark[slot](missing)
                slots.append(f"_missing{slot}")
        lines.append(f"    return [{', '.join(slots)}]")
        exec(compile("\n".join(lines), f"<row plan of {self.table.name}>", "exec"), names)  # noqa: S102 - see docstring
        self._plans[header] = names["row"]
        return names["row"]
