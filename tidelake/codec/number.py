"""Integer and float encodings of TiDB's `util/codec` (docs/encoding.md#comparable-int64-and-uint64).

Memcomparable forms sort bytewise like the numbers they hold, which is what TiKV keys rely on;
varints are the compact, non-comparable forms of row format v1 and compact-bytes lengths.
Decoders take `(buf, offset)` and return `(value, new_offset)` so callers can walk a buffer.
Owner: the codec.
"""

from __future__ import annotations

import struct

from tidelake.errors import InputError

SIGN_MASK = 0x8000_0000_0000_0000
_U64 = (1 << 64) - 1
_BE_U64 = struct.Struct(">Q")
_BE_F64 = struct.Struct(">d")


def _need(buf: bytes, offset: int, n: int, what: str) -> None:
    if offset < 0 or len(buf) - offset < n:
        raise InputError(
            f"{what} truncated at byte {offset}: needs {n} bytes, {max(len(buf) - offset, 0)} left"
        )


def _u64(v: int, what: str) -> int:
    if not 0 <= v <= _U64:
        raise InputError(f"{what} {v} does not fit in 64 bits")
    return v


def int_to_cmp_uint(v: int) -> int:
    """int64 -> uint64 with the sign bit flipped (`EncodeIntToCmpUint`, docs/encoding.md#comparable-int64-and-uint64)."""
    if not -(1 << 63) <= v < (1 << 63):
        raise InputError(f"int64 {v} out of range")
    return (v & _U64) ^ SIGN_MASK


def cmp_uint_to_int(u: int) -> int:
    """Inverse of int_to_cmp_uint (`DecodeCmpUintToInt`, docs/encoding.md#comparable-int64-and-uint64)."""
    v = u ^ SIGN_MASK
    return v - (1 << 64) if v & SIGN_MASK else v


def encode_int(v: int) -> bytes:
    """Memcomparable int64 (`EncodeInt`, docs/encoding.md#comparable-int64-and-uint64): sign bit flipped, 8 bytes big-endian."""
    return _BE_U64.pack(int_to_cmp_uint(v))


def decode_int(buf: bytes, offset: int = 0) -> tuple[int, int]:
    _need(buf, offset, 8, "int64")
    return cmp_uint_to_int(_BE_U64.unpack_from(buf, offset)[0]), offset + 8


def encode_int_desc(v: int) -> bytes:
    """`EncodeIntDesc` (docs/encoding.md#comparable-int64-and-uint64): the bitwise NOT of encode_int, so larger values sort first."""
    return _BE_U64.pack(~int_to_cmp_uint(v) & _U64)


def decode_int_desc(buf: bytes, offset: int = 0) -> tuple[int, int]:
    _need(buf, offset, 8, "int64")
    return cmp_uint_to_int(~_BE_U64.unpack_from(buf, offset)[0] & _U64), offset + 8


def encode_uint(v: int) -> bytes:
    """`EncodeUint` (docs/encoding.md#comparable-int64-and-uint64): plain 8-byte big-endian, already memcomparable."""
    return _BE_U64.pack(_u64(v, "uint64"))


def decode_uint(buf: bytes, offset: int = 0) -> tuple[int, int]:
    _need(buf, offset, 8, "uint64")
    return _BE_U64.unpack_from(buf, offset)[0], offset + 8


def encode_uint_desc(v: int) -> bytes:
    """`EncodeUintDesc` (docs/encoding.md#comparable-int64-and-uint64, docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc): TiKV's MVCC key suffix `^ts`, so newer versions sort first."""
    return _BE_U64.pack(~_u64(v, "uint64") & _U64)


def decode_uint_desc(buf: bytes, offset: int = 0) -> tuple[int, int]:
    _need(buf, offset, 8, "uint64")
    return ~_BE_U64.unpack_from(buf, offset)[0] & _U64, offset + 8


def encode_float(f: float) -> bytes:
    """Memcomparable float64 (docs/encoding.md#comparable-float, current master: tests the sign bit, so -0.0 stays -0.0)."""
    u = _BE_U64.unpack(_BE_F64.pack(f))[0]
    u = u | SIGN_MASK if not u & SIGN_MASK else ~u & _U64
    return _BE_U64.pack(u)


def decode_float(buf: bytes, offset: int = 0) -> tuple[float, int]:
    """Accepts both -0.0 forms (old TiDB wrote it as +0.0, docs/encoding.md#comparable-float)."""
    _need(buf, offset, 8, "float64")
    u = _BE_U64.unpack_from(buf, offset)[0]
    u = u & ~SIGN_MASK if u & SIGN_MASK else ~u & _U64
    return _BE_F64.unpack(_BE_U64.pack(u))[0], offset + 8


def encode_uvarint(v: int) -> bytes:
    """Go `binary.PutUvarint` (docs/encoding.md#varints-not-comparable): LEB128, low 7-bit group first."""
    _u64(v, "uvarint")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def decode_uvarint(buf: bytes, offset: int = 0) -> tuple[int, int]:
    """Go `binary.Uvarint`: at most 10 bytes, rejects 64-bit overflow."""
    value = 0
    shift = 0
    pos = offset
    while True:
        if pos >= len(buf):
            raise InputError(f"varint truncated at byte {offset}: no terminating byte")
        b = buf[pos]
        pos += 1
        if pos - offset == 10 and b > 1:
            raise InputError(f"varint at byte {offset} overflows 64 bits")
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def encode_varint(v: int) -> bytes:
    """Go `binary.PutVarint` (docs/encoding.md#varints-not-comparable): zigzag, then uvarint."""
    int_to_cmp_uint(v)  # int64 range check
    return encode_uvarint(((v << 1) ^ (v >> 63)) & _U64)


def decode_varint(buf: bytes, offset: int = 0) -> tuple[int, int]:
    u, pos = decode_uvarint(buf, offset)
    v = u >> 1
    return (~v if u & 1 else v), pos
