"""The signed integer of one column of a TiDB row v2 value, read without tidelake.codec.

The bank check sums balances out of landed row values; decoding them with the codec the merge
uses would let one bug hide another, so this is a separate, minimal reading of the format
(pingcap/tidb pkg/util/rowcodec/row.go fromBytes, encoder.go encodeInt): byte 0 is 128, byte 1
holds flags (bit 0: large), then the not-null and null column counts (u16 LE each), the column
ids (u8, or u32 LE when large; not-null first), the end offset of each not-null value in the
data area (u16, or u32 LE when large), then the data. A signed int is 1, 2, 4 or 8 bytes LE.
"""

from __future__ import annotations

import struct


class RowFormatError(ValueError):
    """The value is not a row v2 value this reader understands."""


def int_column(value: bytes, column_id: int) -> int | None:
    """The signed integer stored for `column_id`; None when the column is NULL or absent."""
    if len(value) < 6 or value[0] != 128:
        raise RowFormatError(f"not a row v2 value (starts {value[:6].hex()})")
    large = value[1] & 1
    not_null, null = struct.unpack_from("<HH", value, 2)
    id_size, offset_size = (4, 4) if large else (1, 2)
    id_fmt, offset_fmt = ("I", "I") if large else ("B", "H")
    ids_at = 6
    offsets_at = ids_at + (not_null + null) * id_size
    data_at = offsets_at + not_null * offset_size
    if data_at > len(value):
        raise RowFormatError(f"row v2 header runs past the value ({len(value)} bytes)")
    ids = struct.unpack_from(f"<{not_null}{id_fmt}", value, ids_at)
    if column_id not in ids:
        return None
    i = ids.index(column_id)
    ends = struct.unpack_from(f"<{not_null}{offset_fmt}", value, offsets_at)
    start = data_at + (ends[i - 1] if i else 0)
    data = value[start:data_at + ends[i]]
    if len(data) not in (1, 2, 4, 8) or data_at + ends[i] > len(value):
        raise RowFormatError(f"column {column_id}: {len(data)} bytes is no compact int")
    return int.from_bytes(data, "little", signed=True)
