"""Row format v2 layout (docs/encoding.md#layout): header, column-id lists, end offsets, data.

Only the layout lives here; `row_value` turns each column's bytes into a value. Owner: the codec.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from tidelake.errors import InputError

CODEC_VER = 128
FLAG_LARGE = 0x01
FLAG_CHECKSUM = 0x02  # a checksum trailer follows the data area; readers may ignore it
HEADER_LEN = 6
_SMALL_MAX_ID = 0xFF
_SMALL_MAX_DATA = 0xFFFF


@dataclass(frozen=True)
class RowV2:
    """Parsed layout: where each not-null column's bytes are, and which columns are NULL.

    A column id in neither is "missing" and takes its default (docs/encoding.md#layout, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns).
    """

    value: bytes
    spans: dict[int, tuple[int, int]]  # column id -> [start, end) byte offsets in `value`
    null_ids: frozenset[int]
    has_checksum: bool

    def column_bytes(self, column_id: int) -> bytes:
        start, end = self.spans[column_id]
        return self.value[start:end]


def is_row_v2(value: bytes) -> bool:
    """`rowcodec.IsNewFormat` (docs/encoding.md#telling-v1-from-v2)."""
    return len(value) > 0 and value[0] == CODEC_VER


def _read(value: bytes, pos: int, count: int, width: int, what: str) -> list[int]:
    need = count * width
    if len(value) - pos < need:
        raise InputError(
            f"row value truncated at byte {pos}: {count} {what} need {need} bytes, {max(len(value) - pos, 0)} left"
        )
    code = "B" if width == 1 else ("H" if width == 2 else "I")
    return list(struct.unpack_from(f"<{count}{code}", value, pos))


def parse_row_v2(value: bytes) -> RowV2:
    if not is_row_v2(value):
        raise InputError(f"not a row v2 value: byte 0 is {value[:1].hex() or 'missing'}, expected 80")
    if len(value) < HEADER_LEN:
        raise InputError(f"row value truncated at byte {len(value)}: the v2 header needs {HEADER_LEN} bytes")
    flags = value[1]
    large = bool(flags & FLAG_LARGE)
    n_not_null, n_null = struct.unpack_from("<HH", value, 2)
    id_width, off_width = (4, 4) if large else (1, 2)
    pos = HEADER_LEN
    not_null_ids = _read(value, pos, n_not_null, id_width, "not-null column ids")
    pos += n_not_null * id_width
    null_ids = _read(value, pos, n_null, id_width, "null column ids")
    pos += n_null * id_width
    offsets = _read(value, pos, n_not_null, off_width, "value offsets")
    data_start = pos + n_not_null * off_width
    spans: dict[int, tuple[int, int]] = {}
    prev = 0
    for col_id, end in zip(not_null_ids, offsets):
        if end < prev:
            raise InputError(f"row value: column {col_id} ends at data offset {end}, before the previous one ({prev})")
        if data_start + end > len(value):
            raise InputError(
                f"row value truncated at byte {data_start + prev}: column {col_id} needs {end - prev} bytes, "
                f"{len(value) - data_start - prev} left"
            )
        spans[col_id] = (data_start + prev, data_start + end)
        prev = end
    return RowV2(bytes(value), spans, frozenset(null_ids), bool(flags & FLAG_CHECKSUM))


def encode_row_v2(columns: Mapping[int, bytes | None]) -> bytes:
    """Layout a row from column id -> data bytes (None = NULL), as TiDB's encoder does:
    ids ascending, not-null before null, small unless an id > 255 or the data passes 64 KiB."""
    not_null = sorted(cid for cid, data in columns.items() if data is not None)
    nulls = sorted(cid for cid, data in columns.items() if data is None)
    data = bytearray()
    ends = []
    for cid in not_null:
        data += columns[cid]
        ends.append(len(data))
    all_ids = not_null + nulls
    if any(cid < 0 for cid in all_ids):
        raise InputError(f"row v2 cannot hold negative column ids {[c for c in all_ids if c < 0]}")
    large = any(cid > _SMALL_MAX_ID for cid in all_ids) or len(data) > _SMALL_MAX_DATA
    id_code, off_code = ("I", "I") if large else ("B", "H")
    out = bytearray(struct.pack("<BBHH", CODEC_VER, FLAG_LARGE if large else 0, len(not_null), len(nulls)))
    out += struct.pack(f"<{len(all_ids)}{id_code}", *all_ids)
    out += struct.pack(f"<{len(ends)}{off_code}", *ends)
    out += data
    return bytes(out)
