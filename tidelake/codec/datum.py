"""Flagged datums of TiDB's `util/codec` (docs/encoding.md#datum-flags-key-form-versus-value-form).

Index keys, common handles and row format v1 are sequences of `flag byte + payload`. This module
reads and writes those payloads without knowing the column type; `row_value` maps them to and
from the Python value model using the column's FieldType. Owner: the codec.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, NamedTuple

from tidelake.codec.decimal import (
    decimal_bin_size,
    decode_decimal_bin,
    encode_decimal_bin,
)
from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.codec.number import (
    decode_float,
    decode_int,
    decode_uint,
    decode_uvarint,
    decode_varint,
    encode_float,
    encode_int,
    encode_uint,
    encode_uvarint,
    encode_varint,
)
from tidelake.errors import InputError

# docs/encoding.md#datum-flags-key-form-versus-value-form
NIL_FLAG = 0
BYTES_FLAG = 1
COMPACT_BYTES_FLAG = 2
INT_FLAG = 3
UINT_FLAG = 4
FLOAT_FLAG = 5
DECIMAL_FLAG = 6
DURATION_FLAG = 7
VARINT_FLAG = 8
UVARINT_FLAG = 9
JSON_FLAG = 10
VECTOR_FLOAT32_FLAG = 20
MAX_FLAG = 250

# Binary JSON type codes whose size PeekBytesAsJSON knows (docs/encoding.md#binary-json).
_JSON_OBJECT, _JSON_ARRAY, _JSON_LITERAL = 0x01, 0x03, 0x04
_JSON_FIXED8 = frozenset({0x09, 0x0A, 0x0B, 0x0E, 0x0F, 0x10})  # int64 uint64 float64 date datetime timestamp
_JSON_STRING, _JSON_OPAQUE, _JSON_DURATION = 0x0C, 0x0D, 0x11


class Datum(NamedTuple):
    """One decoded datum. `value` is None (nil/max), bytes (bytes/compact/JSON binary incl. its
    type code/vector), int (int/uint/varint/uvarint, duration nanoseconds), float or Decimal."""

    flag: int
    value: Any


def decode_datum(buf: bytes, offset: int = 0) -> tuple[Datum, int]:
    """`DecodeOne`: one datum at `offset`; returns it and the offset after it."""
    if offset >= len(buf):
        raise InputError(f"datum truncated at byte {offset}: missing type flag")
    flag = buf[offset]
    pos = offset + 1
    if flag in (NIL_FLAG, MAX_FLAG):
        return Datum(flag, None), pos
    if flag == BYTES_FLAG:
        raw, pos = decode_bytes(buf, pos)
        return Datum(flag, raw), pos
    if flag == COMPACT_BYTES_FLAG:
        n, pos = decode_varint(buf, pos)
        return Datum(flag, _take(buf, pos, n, "compact bytes")), pos + n
    if flag in (INT_FLAG, DURATION_FLAG):
        value, pos = decode_int(buf, pos)
        return Datum(flag, value), pos
    if flag == UINT_FLAG:
        value, pos = decode_uint(buf, pos)
        return Datum(flag, value), pos
    if flag == FLOAT_FLAG:
        value, pos = decode_float(buf, pos)
        return Datum(flag, value), pos
    if flag == DECIMAL_FLAG:
        value, pos = decode_decimal_payload(buf, pos)
        return Datum(flag, value), pos
    if flag == VARINT_FLAG:
        value, pos = decode_varint(buf, pos)
        return Datum(flag, value), pos
    if flag == UVARINT_FLAG:
        value, pos = decode_uvarint(buf, pos)
        return Datum(flag, value), pos
    if flag == JSON_FLAG:
        n = json_binary_size(buf, pos)
        return Datum(flag, _take(buf, pos, n, "JSON value")), pos + n
    if flag == VECTOR_FLOAT32_FLAG:
        count = int.from_bytes(_take(buf, pos, 4, "vector length"), "little")
        n = 4 + 4 * count
        return Datum(flag, _take(buf, pos, n, "vector")), pos + n
    raise InputError(f"unknown datum flag 0x{flag:02x} at byte {offset}")


def decode_datums(buf: bytes, offset: int = 0, end: int | None = None) -> list[Datum]:
    """All datums in buf[offset:end]."""
    end = len(buf) if end is None else end
    out = []
    while offset < end:
        datum, offset = decode_datum(buf, offset)
        out.append(datum)
    return out


def _take(buf: bytes, pos: int, n: int, what: str) -> bytes:
    if n < 0 or len(buf) - pos < n:
        raise InputError(f"{what} truncated at byte {pos}: needs {n} bytes, {max(len(buf) - pos, 0)} left")
    return bytes(buf[pos : pos + n])


def json_binary_size(buf: bytes, offset: int) -> int:
    """Length of the binary JSON (type code + value) at offset (`PeekBytesAsJSON`)."""
    if offset >= len(buf):
        raise InputError(f"JSON value truncated at byte {offset}: missing type code")
    code = buf[offset]
    if code in (_JSON_OBJECT, _JSON_ARRAY):
        return 1 + int.from_bytes(_take(buf, offset + 5, 4, "JSON container size"), "little")
    if code == _JSON_LITERAL:
        return 2
    if code in _JSON_FIXED8:
        return 9
    if code == _JSON_DURATION:
        return 13
    if code == _JSON_STRING:
        n, pos = decode_uvarint(buf, offset + 1)
        return pos - offset + n
    if code == _JSON_OPAQUE:
        n, pos = decode_uvarint(buf, offset + 2)
        return pos - offset + n
    raise InputError(f"unknown binary JSON type code 0x{code:02x} at byte {offset}")


def decimal_precision_and_frac(value: Decimal) -> tuple[int, int]:
    """`MyDecimal.PrecisionAndFrac` (docs/encoding.md#mydecimal-binary-format): used when a datum carries no length of its own."""
    _, digits, exponent = value.as_tuple()
    frac = max(-int(exponent), 0)
    int_digits = "".join(map(str, digits[: len(digits) - frac] if frac else digits)).lstrip("0")
    if exponent > 0 and int_digits:
        int_digits += "0" * int(exponent)
    return max(len(int_digits) + frac, 1), frac


def encode_decimal_payload(value: Decimal, precision: int, frac: int) -> bytes:
    """`codec.EncodeDecimal`: precision byte, frac byte, MyDecimal bin (docs/encoding.md#datum-flags-key-form-versus-value-form, docs/encoding.md#mydecimal-binary-format).

    precision <= 0 (a datum without a length) uses the value's own PrecisionAndFrac.
    """
    if precision <= 0:
        precision, frac = decimal_precision_and_frac(value)
    return bytes([precision, frac]) + encode_decimal_bin(value, precision, frac)


def decode_decimal_payload(buf: bytes, offset: int) -> tuple[Decimal, int]:
    header = _take(buf, offset, 2, "decimal header")
    precision, frac = header[0], header[1]
    decimal_bin_size(precision, frac)  # validates the shape before reading
    return decode_decimal_bin(buf, offset + 2, precision, frac)


def encode_datum(flag: int, value: Any) -> bytes:
    """Flag + payload for the flags whose payload needs no column type (ints, bytes, floats)."""
    if flag in (NIL_FLAG, MAX_FLAG):
        return bytes([flag])
    if flag == BYTES_FLAG:
        return b"\x01" + encode_bytes(value)
    if flag == COMPACT_BYTES_FLAG:
        return b"\x02" + encode_varint(len(value)) + value
    if flag in (INT_FLAG, DURATION_FLAG):
        return bytes([flag]) + encode_int(value)
    if flag == UINT_FLAG:
        return b"\x04" + encode_uint(value)
    if flag == FLOAT_FLAG:
        return b"\x05" + encode_float(value)
    if flag == VARINT_FLAG:
        return b"\x08" + encode_varint(value)
    if flag == UVARINT_FLAG:
        return b"\x09" + encode_uvarint(value)
    if flag in (JSON_FLAG, VECTOR_FLOAT32_FLAG):
        return bytes([flag]) + value
    raise InputError(f"datum flag {flag} needs a typed encoder")
