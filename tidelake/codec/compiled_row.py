"""Row values -> Spark values, compiled once per table schema: the hot loop of bootstrap and merge.

`decode_row` (tidelake.codec.row) is the reference: it reads any row, v1 or v2, and says in one
line what is wrong with a bad one. Per row it rebuilds the column lists, parses the layout into
dicts and looks up the Spark mapping of every value, which made it ~90% of a bootstrap read.

`CompiledRowDecoder` gives exactly `spark_value(decode_row(value, table, handle).get(c.name))`
for a fixed list of columns, faster:
- The row v2 header (docs/encoding.md §3.1; tidb `pkg/util/rowcodec/row.go` fromBytes) up to the
  end of the column-id lists is the same for every row with the same present and NULL columns,
  so it keys a plan, built once: which data slot feeds which output column, the struct that
  reads the end offsets, and the output row with NULLs, missing-column defaults (§5, as
  `decode_row` fills them) and Spark conversions already applied.
- Each column's converter is chosen once: compact integers and UTF-8 / binary strings are read
  straight from the bytes (§3.3, tidb `pkg/util/rowcodec/decoder.go` decodeColDatum); other
  types go through the reference `decode_value` and `spark_converter`, resolved once.
- Anything the fast path does not take (row v1, a row without a handle, a header or value it
  cannot read) is decoded by `decode_row`, which gives the value or raises its own error: the
  fast path never decides alone that a row is bad.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from operator import le
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
_U64 = (1 << 64) - 1
# docs/encoding.md §3.3: compact integers are 1, 2, 4 or 8 bytes, little-endian
_SIGNED = {n: struct.Struct("<" + c).unpack for n, c in ((1, "b"), (2, "h"), (4, "i"), (8, "q"))}
_UNSIGNED = {n: struct.Struct("<" + c).unpack for n, c in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))}
_MAX_PLANS = 4096  # distinct (present, NULL) column sets kept; a table has few in practice


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
    if tp in mt.STRING_TYPES and spark in ("STRING", "BINARY"):
        return _binary if mt.is_binary_string(field_type) else bytes.decode
    if tp == mt.TYPE_NEWDECIMAL and 1 <= field_type.flen <= MAX_BIN_PRECISION and 0 <= field_type.decimal <= field_type.flen:
        return _decimal(field_type, to_spark, spark.startswith("DECIMAL"))
    fsp = max(field_type.decimal, 0)  # as row_value reads packed times
    if tp in (mt.TYPE_DATE, mt.TYPE_NEWDATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP) and fsp <= MAX_FSP:
        return lambda data: to_spark(unpack_time(_unsigned(data), tp, fsp))
    return lambda data: to_spark(decode_value(data, field_type))


def _decimal(field_type: FieldType, to_spark: Converter, fits: bool) -> Converter:
    """A DECIMAL value as TiDB writes it for this column: `precision frac` bytes equal to the
    column's (Length/Frac come from the column, docs/encoding.md §6), then the MyDecimal. Its
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


class _Plan:
    """How rows with one row-v2 header become output rows."""

    __slots__ = ("ends", "ends_at", "data_start", "template", "stored", "keyed", "checked")

    def __init__(self, ends: struct.Struct, ends_at: int, template: list[Any], stored: list[tuple[int, int, Converter]],
                 keyed: list[tuple[int, str, Converter]], checked: list[tuple[int, FieldType]]) -> None:
        self.ends = ends  # reads the data end offsets, which follow the column-id lists
        self.ends_at = ends_at
        self.data_start = ends_at + ends.size
        self.template = template
        self.stored = stored  # (output slot, position among the not-NULL columns, converter)
        self.keyed = keyed  # (output slot, column name, converter): common-handle columns from the key
        # (position, type) of stored values no output takes (an int PK TiDB did not skip, a column
        # left out of the output): decode_row decodes them, so a bad one is its error too
        self.checked = checked


class CompiledRowDecoder:
    """Spark values of `columns` for row values of one table schema (see module doc)."""

    def __init__(self, table: TableInfo, columns: Sequence[ColumnInfo]) -> None:
        self.table = table
        self.columns = list(columns)
        self.fallbacks = 0  # rows the reference decoder took (tests and benches read it)
        self._to_spark = [spark_converter(c.field_type) for c in self.columns]
        self._from_bytes = [value_converter(c.field_type) for c in self.columns]
        self._readable = {c.id for c in readable_columns(table)}
        pk = table.handle_column()
        self._pk_slot = next((i for i, c in enumerate(self.columns) if pk is not None and c.id == pk.id), None)
        self._pk_unsigned = pk is not None and mt.is_unsigned(pk.field_type.flag)
        # an int PK's Spark type is an integer (kept as is) or, for BIGINT UNSIGNED, DECIMAL(20,0)
        self._pk_decimal = self._pk_slot is not None and spark_type(pk.field_type).startswith("DECIMAL")
        self._plans: dict[bytes, _Plan] = {}

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
        header_end = HEADER_LEN + ((value[2] | value[3] << 8) + (value[4] | value[5] << 8)) * width
        header = value[:header_end]
        plan = self._plans.get(header)
        if plan is None:
            plan = self._plan(header, width)
        ends = plan.ends.unpack_from(value, plan.ends_at)
        start = plan.data_start
        starts = (0, *ends)
        if ends and (start + ends[-1] > len(value) or not all(map(le, starts, ends))):
            raise _Fallback
        out = plan.template.copy()
        for slot, k, conv in plan.stored:
            out[slot] = conv(value[start + starts[k]:start + ends[k]])
        for k, field_type in plan.checked:
            decode_value(value[start + starts[k]:start + ends[k]], field_type)
        if self.table.is_common_handle:
            if type(handle) is not bytes:
                raise _Fallback
            key_values = decode_common_handle(self.table, handle)
            for slot, name, conv in plan.keyed:
                key_value = key_values[name]
                out[slot] = None if key_value is None else conv(key_value)
        elif type(handle) is not int:
            raise _Fallback
        elif self._pk_slot is not None:
            pk = handle & _U64 if self._pk_unsigned else handle
            out[self._pk_slot] = self._to_spark[self._pk_slot](pk) if self._pk_decimal else pk
        return out

    def _plan(self, header: bytes, width: int) -> _Plan:
        """decode_row's choice for every output column, for rows with this header (docs/encoding.md
        §5, §11): the int PK from the key; a stored value; NULL; a common-handle column from the
        key; else the column's missing value."""
        n_not_null, n_null = struct.unpack_from("<HH", header, 2)
        code = "I" if width == 4 else "B"
        ids = struct.unpack_from(f"<{n_not_null + n_null}{code}", header, HEADER_LEN)
        if len(header) != HEADER_LEN + len(ids) * width:
            raise _Fallback
        position = {col_id: k for k, col_id in enumerate(ids[:n_not_null])}  # the last one wins, as in parse_row_v2
        nulls = set(ids[n_not_null:])
        in_key = {c.id for c, _ in pk_columns(self.table)} if self.table.is_common_handle else set()
        template: list[Any] = [None] * len(self.columns)
        stored: list[tuple[int, int, Converter]] = []
        keyed: list[tuple[int, str, Converter]] = []
        output_ids = {c.id for slot, c in enumerate(self.columns) if slot != self._pk_slot}
        checked = [(position[c.id], c.field_type) for c in readable_columns(self.table)
                   if c.id in position and c.id not in output_ids]
        for slot, column in enumerate(self.columns):
            if slot == self._pk_slot or column.id not in self._readable:
                continue
            if column.id in position:
                stored.append((slot, position[column.id], self._from_bytes[slot]))
            elif column.id in nulls:
                continue
            elif column.id in in_key:
                keyed.append((slot, column.name, self._to_spark[slot]))
            else:
                missing = missing_value(column)
                template[slot] = None if missing is None else self._to_spark[slot](missing)
        plan = _Plan(struct.Struct(f"<{n_not_null}{'I' if width == 4 else 'H'}"), len(header), template, stored, keyed, checked)
        if len(self._plans) >= _MAX_PLANS:
            self._plans.clear()
        self._plans[header] = plan
        return plan

