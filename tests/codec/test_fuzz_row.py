"""Property tests for row values v1/v2 (docs/encoding.md#row-value-format-v1 to docs/encoding.md#mydecimal-binary-format) and common handles (docs/encoding.md#row-value-format-v2): encode ->
decode is the identity for generated rows, and arbitrary bytes decode or raise one InputError line."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from codec_tables import BIN, ft, make_table
from fuzz_support import decodes_or_rejects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelake.codec import mysql_types as mt
from tidelake.codec.common_handle import decode_common_handle
from tidelake.codec.datum import decode_datums
from tidelake.codec.row import decode_row, encode_row, row_handle
from tidelake.codec.row_v1 import encode_row_v1, parse_row_v1
from tidelake.codec.row_v2 import encode_row_v2, parse_row_v2
from tidelake.codec.row_value import decode_value, encode_flat_datum

# all_types_table is built once per test (not per example) and never mutated here
uses_table = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

# values for the all_types_table columns whose decode gives back exactly what was encoded
ALL_TYPES_VALUES = {
    "i8": st.integers(-128, 127),
    "u16": st.integers(0, 65535),
    "i24": st.integers(-(1 << 23), (1 << 23) - 1),
    "i32": st.integers(-(1 << 31), (1 << 31) - 1),
    "i64": st.integers(-(1 << 63), (1 << 63) - 1),
    "u64": st.integers(0, (1 << 64) - 1),
    "f64": st.floats(allow_nan=False, allow_infinity=False),
    "dec": st.decimals(min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2),
    "dt": st.dates(min_value=date(1000, 1, 1)),
    "dtm": st.datetimes(min_value=datetime(1000, 1, 1)),
    "yr": st.integers(1901, 2155),
    "vc": st.text(max_size=64),
    "txt": st.text(max_size=200),
    "vb": st.binary(max_size=16),
    "bl": st.binary(max_size=300),
    "en": st.sampled_from(["a", "b", "c"]),
    "js": json_values,
}


@uses_table
@given(st.fixed_dictionaries({}, optional={k: st.none() | v for k, v in ALL_TYPES_VALUES.items()}),
       st.integers(-(1 << 63), (1 << 63) - 1))
def test_row_v2_round_trip(all_types_table, values, rowid):
    decoded = decode_row(encode_row(all_types_table, values), all_types_table, rowid)
    assert {k: decoded[k] for k in values} == values
    assert decoded["_tidb_rowid"] == rowid


@uses_table
@given(st.fixed_dictionaries({}, optional=ALL_TYPES_VALUES))
def test_row_v1_round_trip(all_types_table, values):
    columns = {c.name: c for c in all_types_table.columns}
    v1 = encode_row_v1([(columns[k].id, encode_flat_datum(v, columns[k].field_type)) for k, v in values.items()])
    assert parse_row_v1(v1).keys() == {columns[k].id for k in values}
    decoded = decode_row(v1, all_types_table, 1)
    assert {k: decoded[k] for k in values} == values


@given(st.text(max_size=12), st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=20))
def test_common_handle_round_trip(name, k, v):
    table = make_table([("name", ft(mt.TYPE_VARCHAR, flen=20)), ("k", ft(mt.TYPE_LONGLONG)),
                        ("v", ft(mt.TYPE_BLOB, flag=mt.BINARY_FLAG, **BIN))],
                       is_common_handle=True, primary=["name", "k"])
    values = {"name": name, "k": k, "v": v}
    handle = row_handle(table, values)
    assert decode_row(encode_row(table, values), table, handle) == values


@uses_table
@given(st.binary(max_size=80))
def test_decode_row_on_arbitrary_bytes(all_types_table, value):
    decodes_or_rejects(decode_row, value, all_types_table, 1, where=r"\d|empty")
    decodes_or_rejects(decode_row, b"\x80" + value, all_types_table, 1)  # past the v2 marker
    decodes_or_rejects(parse_row_v1, value)
    decodes_or_rejects(parse_row_v2, b"\x80" + value)


@uses_table
@given(st.data())
def test_decode_row_with_arbitrary_column_bytes(all_types_table, data):
    """A well-formed v1/v2 layout whose column values are junk reaches every value decoder."""
    ids = [c.id for c in all_types_table.columns]
    columns = data.draw(st.dictionaries(st.sampled_from(ids), st.none() | st.binary(max_size=24), max_size=6))
    decodes_or_rejects(decode_row, encode_row_v2(columns), all_types_table, 1)
    v1 = encode_row_v1([(i, raw) for i, raw in columns.items() if raw])
    decodes_or_rejects(decode_row, v1, all_types_table, 1)


@uses_table
@given(st.data(), st.binary(max_size=40))
def test_decode_value_on_arbitrary_bytes(all_types_table, data, raw):
    column = data.draw(st.sampled_from(all_types_table.columns))
    decodes_or_rejects(decode_value, raw, column.field_type, where=None)


@given(st.binary(max_size=60))
def test_common_handle_decoders_on_arbitrary_bytes(handle):
    table = make_table([("name", ft(mt.TYPE_VARCHAR, flen=20)), ("k", ft(mt.TYPE_LONGLONG))],
                       is_common_handle=True, primary=["name", "k"])
    decodes_or_rejects(decode_common_handle, table, handle)
    decodes_or_rejects(decode_datums, handle)
    decodes_or_rejects(decode_row, b"\x80\x00\x00\x00\x00\x00", table, handle)
