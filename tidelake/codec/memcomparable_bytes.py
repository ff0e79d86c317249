"""Memcomparable byte strings (`EncodeBytes`/`DecodeBytes`, docs/encoding.md#comparable-bytes).

The group encoding is prefix-free and sorts like the raw bytes. TiKV orders keys by it and PD
region boundaries are in this form (docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc), so the puller converts every raw key with it before
comparing against a region. Owner: the codec.
"""

from __future__ import annotations

from tidelake.errors import InputError

_GROUP = 8
_MARKER = 0xFF
_PAD = b"\x00" * _GROUP
_FULL_GROUP_MARKER = bytes([_MARKER])


def encoded_len(raw_len: int) -> int:
    return (raw_len // _GROUP + 1) * (_GROUP + 1)


def encode_bytes(raw: bytes) -> bytes:
    """`EncodeBytes(nil, raw)`: 8-byte groups, each followed by marker 0xFF - pad count."""
    out = bytearray()
    n = len(raw)
    full = n - n % _GROUP
    for i in range(0, full, _GROUP):
        out += raw[i : i + _GROUP]
        out += _FULL_GROUP_MARKER
    tail = raw[full:]
    pad = _GROUP - len(tail)
    out += tail
    out += _PAD[:pad]
    out.append(_MARKER - pad)
    return bytes(out)


def decode_bytes(buf: bytes, offset: int = 0) -> tuple[bytes, int]:
    """Inverse of encode_bytes; returns (raw, offset after the value). Rejects bad groups."""
    return _decode(buf, offset, descending=False)


def encode_bytes_desc(raw: bytes) -> bytes:
    """`EncodeBytesDesc`: bitwise NOT of the ascending form."""
    return bytes(b ^ 0xFF for b in encode_bytes(raw))


def decode_bytes_desc(buf: bytes, offset: int = 0) -> tuple[bytes, int]:
    return _decode(buf, offset, descending=True)


def _decode(buf: bytes, offset: int, descending: bool) -> tuple[bytes, int]:
    out = bytearray()
    pos = offset
    while True:
        if len(buf) - pos < _GROUP + 1:
            raise InputError(
                f"memcomparable bytes truncated at byte {pos}: a group needs 9 bytes, "
                f"{max(len(buf) - pos, 0)} left"
            )
        group = buf[pos : pos + _GROUP + 1]
        if descending:
            group = bytes(b ^ 0xFF for b in group)
        pad = _MARKER - group[_GROUP]
        if pad == 0:
            out += group[:_GROUP]
            pos += _GROUP + 1
            continue
        if pad > _GROUP:
            raise InputError(
                f"memcomparable bytes: invalid group marker 0x{buf[pos + _GROUP]:02x} "
                f"at byte {pos + _GROUP}"
            )
        real = _GROUP - pad
        if group[real:_GROUP] != _PAD[:pad]:
            raise InputError(f"memcomparable bytes: non-zero padding in the group at byte {pos}")
        out += group[:real]
        return bytes(out), pos + _GROUP + 1
