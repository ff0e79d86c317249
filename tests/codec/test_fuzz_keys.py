"""Property tests for key decoding (docs/encoding.md#primitive-encodings, docs/encoding.md#keys): round trips of every encoder, and
arbitrary bytes at any offset decode or raise one InputError line naming the byte."""

from __future__ import annotations

import math

from fuzz_support import decodes_or_rejects
from hypothesis import given
from hypothesis import strategies as st

from tidelake.codec import keys
from tidelake.codec import memcomparable_bytes as mb
from tidelake.codec import number as nb
from tidelake.codec.datum import decode_datums

int64s = st.integers(-(1 << 63), (1 << 63) - 1)
uint64s = st.integers(0, (1 << 64) - 1)
table_ids = st.integers(1, keys.MAX_INT48)
offsets = st.integers(0, 40)
junk = st.binary(max_size=64)


@given(int64s)
def test_int_round_trips_and_sorts(v):
    assert nb.decode_int(nb.encode_int(v)) == (v, 8)
    assert nb.decode_int_desc(nb.encode_int_desc(v)) == (v, 8)
    assert nb.decode_varint(nb.encode_varint(v)) == (v, len(nb.encode_varint(v)))


@given(int64s, int64s)
def test_int_encoding_is_memcomparable(a, b):
    assert (nb.encode_int(a) < nb.encode_int(b)) == (a < b)
    assert (nb.encode_int_desc(a) < nb.encode_int_desc(b)) == (a > b)


@given(uint64s)
def test_uint_round_trips(v):
    assert nb.decode_uint(nb.encode_uint(v)) == (v, 8)
    assert nb.decode_uint_desc(nb.encode_uint_desc(v)) == (v, 8)
    assert nb.decode_uvarint(nb.encode_uvarint(v)) == (v, len(nb.encode_uvarint(v)))


@given(st.floats(allow_nan=False))
def test_float_round_trips(f):
    decoded, end = nb.decode_float(nb.encode_float(f))
    assert end == 8 and decoded == f and math.copysign(1, decoded) == math.copysign(1, f)


@given(junk, offsets)
def test_number_decoders_on_arbitrary_bytes(buf, offset):
    for decode in (nb.decode_int, nb.decode_int_desc, nb.decode_uint, nb.decode_uint_desc,
                   nb.decode_float, nb.decode_uvarint, nb.decode_varint):
        result = decodes_or_rejects(decode, buf, offset)
        if result is not None:
            assert offset < result[1] <= len(buf)


@given(st.binary(max_size=40), junk)
def test_memcomparable_bytes_round_trip_and_prefix_free(raw, tail):
    encoded = mb.encode_bytes(raw)
    assert len(encoded) == mb.encoded_len(len(raw))
    assert mb.decode_bytes(encoded + tail) == (raw, len(encoded))
    assert mb.decode_bytes_desc(mb.encode_bytes_desc(raw) + tail) == (raw, len(encoded))


@given(st.binary(max_size=24), st.binary(max_size=24))
def test_memcomparable_bytes_sort_like_raw(a, b):
    assert (mb.encode_bytes(a) < mb.encode_bytes(b)) == (a < b)


@given(junk, offsets)
def test_memcomparable_decoders_on_arbitrary_bytes(buf, offset):
    for decode in (mb.decode_bytes, mb.decode_bytes_desc):
        result = decodes_or_rejects(decode, buf, offset)
        if result is not None:
            raw, end = result
            assert end <= len(buf) and mb.encode_bytes(raw) == (buf[offset:end] if decode is mb.decode_bytes
                                                                else bytes(b ^ 0xFF for b in buf[offset:end]))


@given(table_ids, int64s | st.binary(min_size=keys.COMMON_HANDLE_MIN_LEN, max_size=40))
def test_record_key_round_trip(table_id, handle):
    key = keys.record_key(table_id, handle)
    assert keys.decode_record_key(key) == (table_id, handle)
    assert keys.table_id_of(key) == table_id
    assert keys.from_region_key(keys.to_region_key(key)) == key


@given(table_ids, st.integers(1, 1 << 20), st.binary(max_size=30))
def test_index_key_round_trip(table_id, index_id, values):
    assert keys.decode_index_key(keys.index_key(table_id, index_id, values)) == (table_id, index_id, values)


@given(junk, st.integers(0, 3))
def test_key_decoders_on_arbitrary_bytes(buf, column_count):
    for decode in (keys.decode_record_key, keys.decode_index_key, keys.table_id_of, keys.from_region_key,
                   keys.index_value_handle, decode_datums):
        decodes_or_rejects(decode, buf)
    decodes_or_rejects(keys.split_index_key_values, buf, column_count)


@given(table_ids, junk)
def test_key_decoders_on_table_prefixed_bytes(table_id, tail):
    """Arbitrary tails behind a valid record/index prefix reach the handle and datum decoders."""
    for prefix in (keys.record_prefix(table_id), keys.index_prefix(table_id, 1)):
        decodes_or_rejects(keys.decode_record_key, prefix + tail)
        decoded = decodes_or_rejects(keys.decode_index_key, prefix + tail)
        if decoded is not None:
            decodes_or_rejects(keys.split_index_key_values, decoded[2], 1)
