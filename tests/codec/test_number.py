"""Primitive encodings against the vectors of docs/encoding.md#literal-bytes-from-upstream-tests and
docs/encoding.md#vectors-derived-from-the-rules, plus round trips."""

import math

import pytest

from tidelake.codec import memcomparable_bytes as mb
from tidelake.codec import number as n
from tidelake.errors import InputError

INT64_EDGES = [0, 1, -1, 127, -128, 255, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize(
    ("value", "hex_"),
    [
        (1, "8000000000000001"),
        (0, "8000000000000000"),
        (-1, "7fffffffffffffff"),
        (-(2**63), "0000000000000000"),
        (2**63 - 1, "ffffffffffffffff"),
        (666, "800000000000029a"),  # docs/encoding.md#literal-bytes-from-upstream-tests #7
    ],
)
def test_encode_int_vectors(value, hex_):
    assert n.encode_int(value).hex() == hex_
    assert n.decode_int(bytes.fromhex(hex_)) == (value, 8)


def test_int_encoding_sorts_like_numbers():
    encoded = [n.encode_int(v) for v in sorted(INT64_EDGES)]
    assert encoded == sorted(encoded)
    desc = [n.encode_int_desc(v) for v in sorted(INT64_EDGES)]
    assert desc == sorted(desc, reverse=True)
    assert all(n.decode_int_desc(n.encode_int_desc(v))[0] == v for v in INT64_EDGES)


def test_int_out_of_range_rejected():
    with pytest.raises(InputError):
        n.encode_int(2**63)


def test_uint_and_uint_desc():
    ts = 400000000000000000
    assert n.encode_uint_desc(ts).hex() == "fa72ea1e89d7ffff"  # docs/encoding.md#vectors-derived-from-the-rules D19 suffix
    assert n.decode_uint_desc(n.encode_uint_desc(ts)) == (ts, 8)
    assert n.decode_uint(n.encode_uint(2**64 - 1)) == (2**64 - 1, 8)
    assert n.encode_uint(0x68).hex() == "0000000000000068"


@pytest.mark.parametrize(
    ("value", "hex_"),
    [(1.5, "bff8000000000000"), (-1.5, "4007ffffffffffff"), (0.0, "8000000000000000"), (-0.0, "7fffffffffffffff")],
)
def test_float_vectors(value, hex_):  # docs/encoding.md#vectors-derived-from-the-rules D11
    assert n.encode_float(value).hex() == hex_
    decoded = n.decode_float(bytes.fromhex(hex_))[0]
    assert decoded == value and math.copysign(1, decoded) == math.copysign(1, value)


def test_float_order_and_special_values():
    values = [-math.inf, -1e300, -1.5, -1e-300, 0.0, 1e-300, 1.5, 1e300, math.inf]
    encoded = [n.encode_float(v) for v in values]
    assert encoded == sorted(encoded)
    assert [n.decode_float(e)[0] for e in encoded] == values


@pytest.mark.parametrize("value", INT64_EDGES + [63, -64, 64, -65, 300])
def test_varint_round_trip(value):
    encoded = n.encode_varint(value)
    assert n.decode_varint(encoded + b"\xaa") == (value, len(encoded))


def test_varint_zigzag_and_uvarint_vectors():
    assert n.encode_varint(3).hex() == "06"  # docs/encoding.md#varints-not-comparable: compact length 3 -> 06
    assert n.encode_varint(-1).hex() == "01"
    assert n.encode_varint(100).hex() == "c801"  # docs/encoding.md#vectors-derived-from-the-rules D18
    assert n.encode_uvarint(300).hex() == "ac02"
    assert n.decode_uvarint(n.encode_uvarint(2**64 - 1)) == (2**64 - 1, 10)


def test_varint_errors_name_offset():
    with pytest.raises(InputError, match="byte 1"):
        n.decode_uvarint(b"\x00\x80\x80", 1)
    with pytest.raises(InputError, match="overflows"):
        n.decode_uvarint(b"\xff" * 9 + b"\x02")
    with pytest.raises(InputError, match="truncated at byte 3"):
        n.decode_int(b"\x00" * 10, 3)


@pytest.mark.parametrize(
    ("raw", "hex_"),
    [  # docs/encoding.md#literal-bytes-from-upstream-tests #1–5
        (b"", "0000000000000000f7"),
        (bytes([1, 2, 3]), "0102030000000000fa"),
        (bytes([1, 2, 3, 0]), "0102030000000000fb"),
        (bytes(range(1, 9)), "0102030405060708ff0000000000000000f7"),
        (bytes(range(1, 10)), "0102030405060708ff0900000000000000f8"),
    ],
)
def test_encode_bytes_vectors(raw, hex_):
    assert mb.encode_bytes(raw).hex() == hex_
    assert mb.decode_bytes(bytes.fromhex(hex_) + b"tail") == (raw, len(hex_) // 2)
    assert mb.encoded_len(len(raw)) == len(hex_) // 2


def test_encode_bytes_desc_vector():
    assert mb.encode_bytes_desc(bytes([1, 2, 3])).hex() == "fefdfcffffffffff05"  # docs/encoding.md#literal-bytes-from-upstream-tests #6
    for raw in (b"", b"abc", b"abcdefgh", b"\x00\xff" * 9):
        assert mb.decode_bytes_desc(mb.encode_bytes_desc(raw))[0] == raw


def test_encode_bytes_preserves_order():
    raws = [b"", b"\x00", b"\x00\x00", b"a", b"ab", b"abcdefgh", b"abcdefgh\x00", b"abcdefghi", b"b"]
    assert [mb.encode_bytes(r) for r in raws] == sorted(mb.encode_bytes(r) for r in raws)


@pytest.mark.parametrize(
    ("hex_", "message"),
    [
        ("0102030000000000", "truncated at byte 0"),
        ("0102030405060708ff01", "truncated at byte 9"),
        ("0102030000000000f6", "invalid group marker 0xf6 at byte 8"),
        ("0102030000000100fa", "non-zero padding"),
    ],
)
def test_decode_bytes_rejects_bad_groups(hex_, message):
    with pytest.raises(InputError, match=message):
        mb.decode_bytes(bytes.fromhex(hex_))
