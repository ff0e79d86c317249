"""Property tests for the fixed-shape value codecs: MyDecimal (docs/encoding.md#mydecimal-binary-format), packed times
(docs/encoding.md#packed-time), meta keys (docs/encoding.md#mysql-type-codes-and-column-flags) and column origin defaults: round trips, and arbitrary input decodes or
raises one InputError line."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from codec_tables import BIN, ft, make_table
from fuzz_support import decodes_or_rejects
from hypothesis import given
from hypothesis import strategies as st

from tidelake.codec import meta_keys as mk
from tidelake.codec import mysql_types as mt
from tidelake.codec.column_default import origin_default
from tidelake.codec.decimal import (
    decimal_bin_size,
    decode_decimal_bin,
    encode_decimal_bin,
)
from tidelake.codec.mytime import (
    duration_from_nanos,
    duration_to_nanos,
    pack_time,
    unpack_time,
)

shapes = st.integers(1, 65).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, min(p, 30))))


@given(shapes, st.data())
def test_decimal_round_trip(shape, data):
    precision, frac = shape
    bound = 10 ** (precision - frac) - 1 if precision > frac else 0
    value = data.draw(st.decimals(min_value=-bound, max_value=bound, places=frac, allow_nan=False, allow_infinity=False)
                      if bound else st.decimals(min_value="-0." + "9" * frac, max_value="0." + "9" * frac, places=frac))
    encoded = encode_decimal_bin(value, precision, frac)
    assert len(encoded) == decimal_bin_size(precision, frac)
    assert decode_decimal_bin(encoded + b"\xff", 0, precision, frac) == (value, len(encoded))


@given(st.binary(max_size=40), st.integers(-2, 90), st.integers(-2, 40), st.integers(0, 4))
def test_decimal_decode_on_arbitrary_bytes(buf, precision, frac, offset):
    decodes_or_rejects(decode_decimal_bin, buf, offset, precision, frac)


@given(st.datetimes(min_value=datetime(1000, 1, 1)), st.integers(0, 6))
def test_datetime_pack_round_trip(value, fsp):
    value = value.replace(microsecond=value.microsecond // 10 ** (6 - fsp) * 10 ** (6 - fsp))
    assert unpack_time(pack_time(value, mt.TYPE_DATETIME, fsp), mt.TYPE_DATETIME, fsp) == value


@given(st.integers(0, (1 << 64) - 1),
       st.sampled_from([mt.TYPE_DATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP, mt.TYPE_DURATION, mt.TYPE_LONG]),
       st.integers(-1, 8))
def test_unpack_time_on_arbitrary_words(packed, tp, fsp):
    decodes_or_rejects(unpack_time, packed, tp, fsp, where=None)


@given(st.integers(-(838 * 3600 + 3599) * 10**9, (838 * 3600 + 3599) * 10**9).map(lambda n: n - n % 1000))
def test_duration_round_trip(nanos):
    assert duration_to_nanos(duration_from_nanos(nanos)) == nanos


@given(st.binary(max_size=60))
def test_meta_key_decoders_on_arbitrary_bytes(raw):
    for decode in (mk.decode_meta_key, mk.parse_table_field, mk.parse_db_key):
        decodes_or_rejects(decode, raw, where=None)


@given(st.integers(1, (1 << 62)), st.integers(1, (1 << 62)))
def test_meta_key_round_trip(db_id, table_id):
    assert mk.parse_db_key(mk.db_key(db_id)) == db_id
    assert mk.parse_table_field(mk.table_field(table_id)) == table_id
    assert mk.decode_meta_key(mk.table_info_key(db_id, table_id)) is not None


DEFAULT_TYPES = [
    ft(mt.TYPE_TINY), ft(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG), ft(mt.TYPE_FLOAT), ft(mt.TYPE_DOUBLE),
    ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=2), ft(mt.TYPE_DATE), ft(mt.TYPE_DATETIME, decimal=6),
    ft(mt.TYPE_TIMESTAMP, decimal=3), ft(mt.TYPE_DURATION, decimal=2), ft(mt.TYPE_YEAR), ft(mt.TYPE_VARCHAR, flen=8),
    ft(mt.TYPE_BLOB, flag=mt.BINARY_FLAG, **BIN), ft(mt.TYPE_ENUM, elems=["a", "b"]), ft(mt.TYPE_SET, elems=["x", "y"]),
    ft(mt.TYPE_BIT, flen=16), ft(mt.TYPE_JSON),
]
DEFAULTS_TABLE = make_table([(f"c{i}", t) for i, t in enumerate(DEFAULT_TYPES)])
LIKELY_DEFAULTS = ["1e400", "-0", "9" * 30, "2024-13-01", "00:00:99", "838:59:59.999", "0000-00-00 00:00:00",
                   "b'101'", "0x1f", "a,b", "NaN", "inf", "1.5", "  7 ", "CURRENT_TIMESTAMP"]


@given(st.sampled_from(DEFAULTS_TABLE.columns), st.text(max_size=30) | st.sampled_from(LIKELY_DEFAULTS),
       st.none() | st.binary(max_size=10))
def test_origin_default_on_arbitrary_text(column, text, bit):
    """A table's stored origin default (schema JSON, so input) parses or is one InputError line."""
    decodes_or_rejects(origin_default, replace(column, origin_default=text, origin_default_bit=bit), where=None)
