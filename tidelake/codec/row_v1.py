"""Row format v1 (docs/encoding.md#row-value-format-v1): alternating column-id and value datums.

Clusters upgraded from TiDB < 4.0 may still write it, so one table can hold both formats.
Owner: the codec.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidelake.codec.datum import (
    NIL_FLAG,
    VARINT_FLAG,
    Datum,
    decode_datum,
    encode_datum,
)
from tidelake.errors import InputError


def parse_row_v1(value: bytes) -> dict[int, tuple[Datum, int]]:
    """Column id -> (flattened datum, byte offset of the datum). `00` alone is an empty row."""
    if value == bytes([NIL_FLAG]):
        return {}
    out: dict[int, tuple[Datum, int]] = {}
    pos = 0
    while pos < len(value):
        id_datum, value_pos = decode_datum(value, pos)
        if id_datum.flag != VARINT_FLAG:
            raise InputError(f"row v1: expected a column id (flag 08) at byte {pos}, got flag {id_datum.flag:02x}")
        datum, pos = decode_datum(value, value_pos)
        out[id_datum.value] = (datum, value_pos)
    return out


def encode_row_v1(columns: Iterable[tuple[int, bytes]]) -> bytes:
    """`EncodeOldRow` from (column id, already flattened value datum) pairs."""
    out = bytearray()
    for col_id, datum_bytes in columns:
        out += encode_datum(VARINT_FLAG, col_id) + datum_bytes
    return bytes(out) or bytes([NIL_FLAG])
