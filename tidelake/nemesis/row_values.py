"""Column values of a TiDB row v2 value, read without tidelake.codec, in the apply check's
canonical form (one Python value per column type, which a replica value is normalised to too):
the checker shares no decoder with what it checks.

More: docs/internals.md#row_values.
"""

from __future__ import annotations

import base64
import struct
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from tidelake.nemesis.json_value import json_value
from tidelake.nemesis.value_errors import RowFormatError, Unchecked

# MySQL type codes (pingcap/tidb pkg/parser/mysql/type.go; docs/encoding.md#mysql-type-codes-and-column-flags)
TINY, SHORT, LONG, FLOAT, DOUBLE, TIMESTAMP, LONGLONG, INT24 = 1, 2, 3, 4, 5, 7, 8, 9
DATE, DURATION, DATETIME, YEAR, NEWDATE, VARCHAR, BIT = 10, 11, 12, 13, 14, 15, 16
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING = 249, 250, 251, 252, 253, 254
INTEGERS = frozenset({TINY, SHORT, INT24, LONG, LONGLONG})
STRINGS = frozenset({VARCHAR, VAR_STRING, STRING, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB})
PACKED_TIMES = frozenset({DATE, NEWDATE, DATETIME, TIMESTAMP})
UNSIGNED_FLAG, NOT_NULL_FLAG = 32, 1
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # docs/encoding.md#mydecimal-binary-format
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def row_columns(value: bytes) -> tuple[dict[int, bytes], frozenset[int]]:
    """(column id -> value bytes of each not-null column, ids of the NULL columns); docs/encoding.md#layout."""
    if len(value) < 6 or value[0] != 128:
        raise RowFormatError(f"not a row v2 value (starts {value[:6].hex()})")
    large = value[1] & 1
    not_null, null = struct.unpack_from("<HH", value, 2)
    id_size, offset_size = (4, 4) if large else (1, 2)
    id_fmt, offset_fmt = ("I", "I") if large else ("B", "H")
    offsets_at = 6 + (not_null + null) * id_size
    data_at = offsets_at + not_null * offset_size
    if data_at > len(value):
        raise RowFormatError(f"row v2 header runs past the value ({len(value)} bytes)")
    ids = struct.unpack_from(f"<{not_null + null}{id_fmt}", value, 6)
    ends = struct.unpack_from(f"<{not_null}{offset_fmt}", value, offsets_at)
    if not_null and data_at + ends[-1] > len(value):
        raise RowFormatError(f"row v2 data area ends at {data_at + ends[-1]}, past the value ({len(value)} bytes)")
    columns = {}
    for i in range(not_null):
        columns[ids[i]] = value[data_at + (ends[i - 1] if i else 0):data_at + ends[i]]
    return columns, frozenset(ids[not_null:])


def compact_int(data: bytes, signed: bool) -> int:
    """pingcap/tidb pkg/util/rowcodec encodeInt / encodeUint: 1, 2, 4 or 8 bytes little-endian."""
    if len(data) not in (1, 2, 4, 8):
        raise RowFormatError(f"{len(data)} bytes is no compact int")
    return int.from_bytes(data, "little", signed=signed)


def column_value(data: bytes, column: dict) -> Any:
    """The canonical value of a not-null column's bytes, read by the column's FieldType."""
    ft = column["type"]
    tp, flag = ft["Tp"], ft.get("Flag", 0)
    if tp in INTEGERS:
        return compact_int(data, signed=not flag & UNSIGNED_FLAG)
    if tp == YEAR:
        return compact_int(data, signed=True)
    if tp == BIT:
        return compact_int(data, signed=False)
    if tp in (FLOAT, DOUBLE):
        return comparable_float(data, narrow=tp == FLOAT)
    if tp == NEWDECIMAL:
        return decimal_value(data)
    if tp in PACKED_TIMES:
        return packed_time(compact_int(data, signed=False), tp)
    if tp == DURATION:
        return compact_int(data, signed=True) // 1000  # nanoseconds -> microseconds (fsp <= 6)
    if tp in STRINGS:
        return bytes(data) if ft.get("Charset") == "binary" else bytes(data).decode("utf-8")
    if tp == ENUM:
        index = compact_int(data, signed=False)
        return ft["Elems"][index - 1] if index else ""
    if tp == SET:
        bits = compact_int(data, signed=False)
        return ",".join(e for i, e in enumerate(ft["Elems"]) if bits >> i & 1)
    if tp == JSON:
        return json_value(bytes(data))
    raise Unchecked(f"column type {tp}")


def comparable_float(data: bytes, narrow: bool = False) -> float:
    """docs/encoding.md#comparable-float: big-endian, sign bit set for a positive value, every bit flipped
    for a negative one. FLOAT is stored widened to float64 and narrowed back (docs/encoding.md#value-bytes-per-column-type)."""
    if len(data) != 8:
        raise RowFormatError(f"a float is 8 bytes, not {len(data)}")
    bits = int.from_bytes(data, "big")
    bits = bits ^ (1 << 63) if bits >> 63 else ~bits & ((1 << 64) - 1)
    value = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
    return struct.unpack("<f", struct.pack("<f", value))[0] if narrow else value


def decimal_value(data: bytes) -> Decimal:
    """`[precision][frac]` then MyDecimal binary (docs/encoding.md#mydecimal-binary-format; pingcap/tidb pkg/types/mydecimal.go FromBin)."""
    if len(data) < 3:
        raise RowFormatError(f"decimal of {len(data)} bytes")
    precision, frac = data[0], data[1]
    intg = precision - frac
    size = (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (frac // 9) * 4 + _DIG2BYTES[frac % 9]
    if intg < 0 or len(data) != 2 + size:
        raise RowFormatError(f"decimal ({precision},{frac}) takes {size} bytes, not {len(data) - 2}")
    raw = bytearray(data[2:])
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    pos = 0

    def take(digits: int) -> str:
        nonlocal pos
        width = 4 if digits == 9 else _DIG2BYTES[digits]
        group = int.from_bytes(raw[pos:pos + width], "big")
        pos += width
        return str(group).zfill(digits)

    whole = ([take(intg % 9)] if intg % 9 else []) + [take(9) for _ in range(intg // 9)]
    fraction = [take(9) for _ in range(frac // 9)] + ([take(frac % 9)] if frac % 9 else [])
    text = f"{'-' if negative else ''}{''.join(whole) or '0'}.{''.join(fraction) or '0'}"
    return Decimal(text)


def packed_time(packed: int, tp: int) -> date | datetime | int | None:
    """docs/encoding.md#packed-time (pingcap/tidb pkg/types/time.go FromPackedUint). A TIMESTAMP packs its
    UTC wall clock. Zero and partial dates have no Spark value (the replica holds NULL)."""
    micro = packed & 0xFFFFFF
    ymdhms = packed >> 24
    ymd, hms = ymdhms >> 17, ymdhms & 0x1FFFF
    day, year_month = ymd & 31, ymd >> 5
    year, month = divmod(year_month, 13)
    if month == 0 or day == 0:
        return None
    if tp in (DATE, NEWDATE):
        return date(year, month, day)
    wall = datetime(year, month, day, hms >> 12, (hms >> 6) & 63, hms & 63, micro)
    if tp == TIMESTAMP:
        return epoch_micros(wall.replace(tzinfo=timezone.utc))
    return wall


def duration_micros(text: str) -> int:
    """Signed microseconds of a TIME text `[-]HH:MM:SS[.ffffff]`."""
    negative = text.startswith("-")
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, fraction = seconds.partition(".")
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + int(fraction.ljust(6, "0"))
    return -micros if negative else micros


def epoch_micros(instant: datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def missing_value(column: dict) -> Any:
    """What a row that does not hold the column reads as (docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns): its origin default,
    else NULL when nullable. TiDB keeps the default as text (a TIMESTAMP's in UTC) and a BIT's as
    base64 bytes in `origin_default_bit`; a type whose default this reader does not parse raises
    Unchecked."""
    text = column.get("origin_default")
    ft = column["type"]
    tp = ft["Tp"]
    if tp == BIT and column.get("origin_default_bit") is not None:
        return int.from_bytes(base64.b64decode(column["origin_default_bit"]), "big")
    if text is None:
        if ft.get("Flag", 0) & NOT_NULL_FLAG:
            raise Unchecked(f"NOT NULL column {column['name']['O']} missing without a default")
        return None
    if tp in INTEGERS or tp == YEAR:
        return int(text)
    if tp in (FLOAT, DOUBLE):
        value = float(text)
        return struct.unpack("<f", struct.pack("<f", value))[0] if tp == FLOAT else value
    if tp == NEWDECIMAL:
        return Decimal(str(text))
    if tp in STRINGS and ft.get("Charset") != "binary":
        return str(text)
    if tp in (ENUM, SET):
        return str(text)
    if tp in (DATE, NEWDATE):
        return date.fromisoformat(str(text)[:10])
    if tp == DATETIME:
        return datetime.fromisoformat(str(text))
    if tp == TIMESTAMP:
        return epoch_micros(datetime.fromisoformat(str(text)).replace(tzinfo=timezone.utc))
    if tp == DURATION:
        return duration_micros(str(text))
    raise Unchecked(f"origin default of type {tp}")
