"""The compiled decoder equals the reference (decode_row + spark_value) on generated rows of every
mapped type and every handle kind, with NULL, missing (added-later) and dropped columns, and on
junk: the same values, or the same one-line error. The reference stays in the product (it reads
row v1 and whatever the fast path declines), so comparing the two is the check that matters.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from codec_tables import BIN, ft, make_table
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelake.codec import mysql_types as mt
from tidelake.codec.compiled_row import CompiledRowDecoder
from tidelake.codec.row import decode_row, encode_row, row_handle
from tidelake.codec.row_v1 import encode_row_v1
from tidelake.codec.row_v2 import encode_row_v2
from tidelake.codec.row_value import encode_flat_datum
from tidelake.codec.schema import ColumnInfo
from tidelake.codec.spark_types import spark_value
from tidelake.errors import InputError

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
utc_times = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2037, 12, 31)).map(
    lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=timezone.utc))

# (name, FieldType, values): one column of every type the replica mapping has
COLUMNS = [
    ("i8", ft(mt.TYPE_TINY), st.integers(-128, 127)),
    ("u8", ft(mt.TYPE_TINY, flag=mt.UNSIGNED_FLAG), st.integers(0, 255)),
    ("u16", ft(mt.TYPE_SHORT, flag=mt.UNSIGNED_FLAG), st.integers(0, 65535)),
    ("i24", ft(mt.TYPE_INT24), st.integers(-(1 << 23), (1 << 23) - 1)),
    ("i32", ft(mt.TYPE_LONG), st.integers(-(1 << 31), (1 << 31) - 1)),
    ("u32", ft(mt.TYPE_LONG, flag=mt.UNSIGNED_FLAG), st.integers(0, (1 << 32) - 1)),
    ("i64", ft(mt.TYPE_LONGLONG), st.integers(-(1 << 63), (1 << 63) - 1)),
    # above int64 too: an UNSIGNED PK's handle is then a negative int64 (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)
    ("u64", ft(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG), st.integers(0, (1 << 64) - 1) | st.integers(1 << 63, (1 << 64) - 1)),
    ("f32", ft(mt.TYPE_FLOAT), st.floats(width=32, allow_nan=False)),
    ("f64", ft(mt.TYPE_DOUBLE), st.floats(allow_nan=False)),
    ("dec", ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=2),
     st.decimals(min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2)),
    ("d0", ft(mt.TYPE_NEWDECIMAL, flen=20, decimal=0), st.decimals(min_value=-(10**20) + 1, max_value=10**20 - 1, places=0)),
    ("wide", ft(mt.TYPE_NEWDECIMAL, flen=60, decimal=10),
     st.decimals(min_value=Decimal("-1e40"), max_value=Decimal("1e40"), places=10)),
    ("dt", ft(mt.TYPE_DATE), st.dates(min_value=date(1000, 1, 1))),
    ("dtm", ft(mt.TYPE_DATETIME, decimal=6), st.datetimes(min_value=datetime(1000, 1, 1))),
    ("ts", ft(mt.TYPE_TIMESTAMP, decimal=3), utc_times),
    ("tm", ft(mt.TYPE_DURATION, decimal=6),
     st.integers(-838 * 3600 * 10**6, 838 * 3600 * 10**6).map(lambda us: timedelta(microseconds=us))),
    ("yr", ft(mt.TYPE_YEAR), st.integers(1901, 2155)),
    ("vc", ft(mt.TYPE_VARCHAR, flen=64), st.text(max_size=64)),
    ("ch", ft(mt.TYPE_STRING, flen=8), st.text(max_size=8)),
    ("txt", ft(mt.TYPE_BLOB), st.text(max_size=300)),
    ("vb", ft(mt.TYPE_VARCHAR, flag=mt.BINARY_FLAG, flen=16, **BIN), st.binary(max_size=16)),
    ("bl", ft(mt.TYPE_BLOB, flag=mt.BINARY_FLAG, **BIN), st.binary(max_size=300)),
    ("en", ft(mt.TYPE_ENUM, elems=["a", "b", "c"]), st.sampled_from(["", "a", "b", "c"])),
    ("st", ft(mt.TYPE_SET, elems=["x", "y", "z"]), st.sampled_from(["", "x", "y,z", "x,y,z"])),
    ("bt", ft(mt.TYPE_BIT, flen=16), st.integers(0, 65535)),
    ("bt64", ft(mt.TYPE_BIT, flen=64), st.integers(0, (1 << 64) - 1)),
    ("js", ft(mt.TYPE_JSON), json_values),
    ("vec", ft(mt.TYPE_TIDB_VECTOR_FLOAT32), st.lists(st.floats(width=32, allow_nan=False), max_size=4)),
]
VALUES = {name: values for name, _, values in COLUMNS}
# how the row's key holds it: _tidb_rowid, a signed or UNSIGNED int PK, a clustered common handle
HANDLES = ["rowid", "int_pk", "uint_pk", "common"]
# columns added after the row was written (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns): origin default, NULL, zero value
ADDED = [
    ("add_int", ft(mt.TYPE_LONG, flag=mt.NOT_NULL_FLAG), "7"),
    ("add_vc", ft(mt.TYPE_VARCHAR, flen=10), "abc"),
    ("add_dtm", ft(mt.TYPE_DATETIME, decimal=0), "2020-01-02 03:04:05"),
    ("add_dec", ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=2), "1.5"),
    ("add_null", ft(mt.TYPE_LONG), None),
    ("add_zero", ft(mt.TYPE_VARCHAR, flag=mt.NOT_NULL_FLAG, flen=10), None),
]


def _table(handle: str):
    types = {name: f for name, f, _ in COLUMNS}
    kw: dict = {}
    if handle == "int_pk":
        types["i64"] = ft(mt.TYPE_LONGLONG, flag=mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG)
        kw = {"pk_is_handle": True}
    elif handle == "uint_pk":
        types["u64"] = ft(mt.TYPE_LONGLONG, flag=mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG | mt.UNSIGNED_FLAG)
        kw = {"pk_is_handle": True}
    elif handle == "common":
        types["vc"] = ft(mt.TYPE_VARCHAR, flag=mt.NOT_NULL_FLAG, flen=64)
        types["i32"] = ft(mt.TYPE_LONG, flag=mt.NOT_NULL_FLAG)
        kw = {"is_common_handle": True, "primary": ["vc", "i32"]}
    return make_table(list(types.items()), **kw)


def _with_added(table, added: list[int]):
    """The table after ADD COLUMN of the chosen ADDED columns (origin defaults as TiDB stores them)."""
    columns = list(table.columns)
    for i in added:
        name, field_type, default = ADDED[i]
        columns.append(ColumnInfo(len(columns) + 1, name, len(columns), field_type, origin_default=default))
    return replace(table, columns=columns, max_col_id=len(columns))


def reference(table, columns, value, handle):
    """What bootstrap and merge produced before the compiled decoder, kept as the oracle."""
    row = decode_row(value, table, handle)
    return [spark_value(row.get(c.name), c.field_type) for c in columns]


def outcome(fn, *args):
    """The values with their Python types (1 == True == Decimal(1) to `==`, not to Arrow), or the error."""
    try:
        return ("ok", [(type(v), v) for v in fn(*args)])
    except InputError as exc:
        return ("error", str(exc))


def assert_same(table, columns, value, handle) -> CompiledRowDecoder:
    compiled = CompiledRowDecoder(table, columns)
    assert outcome(compiled.spark_row, value, handle) == outcome(reference, table, columns, value, handle)
    return compiled


@st.composite
def rows(draw):
    handle_kind = draw(st.sampled_from(HANDLES))
    table = _table(handle_kind)
    key_names = {"int_pk": ["i64"], "uint_pk": ["u64"], "common": ["vc", "i32"]}.get(handle_kind, [])
    values = draw(st.fixed_dictionaries(
        {k: VALUES[k] for k in key_names},
        optional={k: st.none() | v for k, v in VALUES.items() if k not in key_names}))
    if handle_kind == "rowid":
        handle = draw(st.integers(-(1 << 63), (1 << 63) - 1))
    else:
        handle = row_handle(table, values)
    value = encode_row(table, values)
    decoded_with = _with_added(table, draw(st.lists(st.integers(0, len(ADDED) - 1), unique=True, max_size=3)))
    dropped = draw(st.sets(st.sampled_from([c.id for c in decoded_with.columns if c.name not in key_names]), max_size=3))
    decoded_with = replace(decoded_with, columns=[c for c in decoded_with.columns if c.id not in dropped])
    return decoded_with, value, handle


@settings(max_examples=300, deadline=None)
@given(rows())
def test_equals_the_reference_on_rows_of_every_type_and_handle(case):
    table, value, handle = case
    columns = [c for c in table.columns]
    compiled = assert_same(table, columns, value, handle)
    assert compiled.fallbacks == 0, "a well-formed v2 row with its handle must not need the reference"


@settings(deadline=None)
@given(rows(), st.data())
def test_rows_sharing_a_header_reuse_one_plan_and_stay_equal(case, data):
    """One decoder over many rows (plans cached by header), columns in any order and subset."""
    table, value, handle = case
    columns = data.draw(st.permutations(table.columns))[: data.draw(st.integers(1, len(table.columns)))]
    compiled = CompiledRowDecoder(table, columns)
    for _ in range(2):
        assert compiled.spark_row(value, handle) == reference(table, columns, value, handle)
    assert len(compiled._plans) == 1


@settings(deadline=None)
@given(st.sampled_from(HANDLES), st.dictionaries(st.integers(1, len(COLUMNS) + 2), st.none() | st.binary(max_size=24),
                                                  max_size=8), st.integers(-(1 << 63), (1 << 63) - 1) | st.binary(max_size=20))
def test_junk_column_bytes_give_the_same_values_or_the_same_error(handle_kind, columns, handle):
    table = _table(handle_kind)
    assert_same(table, table.columns, encode_row_v2(columns), handle)
    assert_same(table, table.columns, encode_row_v2({i: raw or b"" for i, raw in columns.items()}), handle)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(HANDLES), st.integers(1, len(COLUMNS)), st.binary(max_size=24))
def test_one_junk_column_gives_the_same_value_or_the_same_error(handle_kind, column_id, junk):
    """Every converter meets bytes of the wrong length or content (bad UTF-8, a 3-byte integer...)."""
    table = _table(handle_kind)
    handle = row_handle(table, {"vc": "k", "i32": 1}) if handle_kind == "common" else 7
    assert_same(table, table.columns, encode_row_v2({column_id: junk}), handle)


@settings(deadline=None)
@given(rows(), st.data())
def test_a_truncated_row_is_the_reference_error(case, data):
    table, value, handle = case
    cut = data.draw(st.integers(0, len(value) - 1))
    assert_same(table, table.columns, value[:cut], handle)


def test_data_offsets_that_go_back_are_the_reference_error():
    table = _table("rowid")
    vc, txt = (next(c for c in table.columns if c.name == n) for n in ("vc", "txt"))
    value = bytes([0x80, 0, 2, 0, 0, 0, vc.id, txt.id, 3, 0, 1, 0]) + b"abc"
    with pytest.raises(InputError, match="before the previous one"):
        assert_same(table, table.columns, value, 1).spark_row(value, 1)


def test_a_column_id_twice_in_the_header_takes_the_last_as_the_reference_does():
    table = _table("rowid")
    i32 = next(c for c in table.columns if c.name == "i32")
    value = bytes([0x80, 0, 2, 0, 0, 0, i32.id, i32.id, 1, 0, 2, 0, 5, 6])
    assert assert_same(table, table.columns, value, 1).spark_row(value, 1)[4] == 6


@settings(deadline=None)
@given(st.sampled_from(HANDLES), st.binary(max_size=60), st.integers(-(1 << 63), (1 << 63) - 1) | st.binary(max_size=20))
def test_junk_row_values_give_the_same_values_or_the_same_error(handle_kind, junk, handle):
    table = _table(handle_kind)
    for value in (junk, b"\x80" + junk, b"\x80\x00" + junk, b"\x80\x01" + junk):
        assert_same(table, table.columns, value, handle)


def test_row_v1_and_rows_without_a_handle_go_to_the_reference():
    table = _table("rowid")
    by_name = {c.name: c for c in table.columns}
    v1 = encode_row_v1([(by_name[n].id, encode_flat_datum(v, by_name[n].field_type)) for n, v in
                        (("i32", 5), ("vc", "héllo"), ("dec", Decimal("1.25")))])
    assert assert_same(table, table.columns, v1, 3).fallbacks == 1
    v2 = encode_row(table, {"i32": 5})
    assert assert_same(table, table.columns, v2, None).fallbacks == 1


@pytest.mark.parametrize("handle_kind", HANDLES)
def test_a_handle_of_the_wrong_kind_is_the_reference_error(handle_kind):
    table = _table(handle_kind)
    value = encode_row(table, {"vc": "k", "i32": 1, "i64": 2, "u64": 3})
    wrong = 5 if handle_kind == "common" else b"\x01" * 9
    with pytest.raises(InputError, match="handle"):
        assert_same(table, table.columns, value, wrong).spark_row(value, wrong)


def test_past_the_plan_cap_rows_with_new_headers_go_to_the_reference_and_stay_equal():
    """A table whose NULLs are left out of the row (no default: docs/encoding.md#which-columns-the-writer-stores) gives most
    rows their own header; compiling each would cost more than decoding it."""
    from tidelake.codec.compiled_row import _MAX_PLANS

    table = _table("rowid")
    optional = ["i8", "i32", "i64", "vc", "dec", "dt", "ts", "bl"]
    compiled = CompiledRowDecoder(table, table.columns)
    sample = {"i8": 1, "i32": 2, "i64": 3, "vc": "x", "dec": Decimal("1.25"), "dt": date(2020, 1, 2),
              "ts": datetime(2020, 1, 2, tzinfo=timezone.utc), "bl": b"\x00"}
    headers = 0
    for mask in range(1, 1 << len(optional)):
        value = encode_row(table, {n: sample[n] for i, n in enumerate(optional) if mask >> i & 1})
        assert outcome(compiled.spark_row, value, 5) == outcome(reference, table, table.columns, value, 5)
        headers += 1
    assert len(compiled._plans) == _MAX_PLANS  # noqa: SLF001
    assert compiled.fallbacks == headers - _MAX_PLANS
