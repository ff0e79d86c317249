"""One column value <-> bytes, per MySQL type: row v2 data area (docs/encoding.md#value-bytes-per-column-type) and
flagged datums of keys and row v1 (docs/encoding.md#datum-flags-key-form-versus-value-form, docs/encoding.md#row-value-format-v1).

The Python value model (shared with codec.mytime/decimal/json_binary): ints -> int, FLOAT/DOUBLE
-> float, DECIMAL -> Decimal, text -> str, binary strings -> bytes, DATE -> date, DATETIME -> naive
datetime, TIMESTAMP -> UTC-aware datetime, TIME -> timedelta, YEAR/BIT -> int, ENUM/SET -> str,
JSON -> Python object, NULL -> None. The FieldType decides the bytes; nothing is stored inline.
Owner: the codec.
"""

from __future__ import annotations

import math
import struct
from datetime import timedelta
from decimal import Decimal
from typing import Any

from tidelake.codec import mysql_types as mt
from tidelake.codec.datum import (
    BYTES_FLAG,
    COMPACT_BYTES_FLAG,
    DECIMAL_FLAG,
    DURATION_FLAG,
    FLOAT_FLAG,
    INT_FLAG,
    JSON_FLAG,
    NIL_FLAG,
    UINT_FLAG,
    UVARINT_FLAG,
    VARINT_FLAG,
    VECTOR_FLOAT32_FLAG,
    Datum,
    decode_decimal_payload,
    encode_datum,
    encode_decimal_payload,
)
from tidelake.codec.json_binary import JSON_NULL, decode_json_binary, encode_json_binary
from tidelake.codec.mytime import (
    MySQLTime,
    duration_from_nanos,
    duration_to_nanos,
    pack_time,
    unpack_time,
)
from tidelake.codec.number import decode_float, encode_float
from tidelake.codec.schema import FieldType
from tidelake.errors import InputError

_U64 = (1 << 64) - 1
_INT_WIDTHS = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT_WIDTHS = {1: "B", 2: "H", 4: "I", 8: "Q"}
_F32 = struct.Struct("<f")
_PACKED_TIME_TYPES = frozenset({mt.TYPE_DATE, mt.TYPE_NEWDATE, mt.TYPE_DATETIME, mt.TYPE_TIMESTAMP})
# docs/encoding.md#which-columns-the-writer-stores NeedRestoredData: utf8mb4_0900_bin keys hold the string unchanged.
_NO_PAD_BIN_COLLATION = "utf8mb4_0900_bin"


def _type_name(ft: FieldType) -> str:
    return mt.TYPE_NAMES.get(ft.tp, f"type code {ft.tp}")


# --- compact integers (docs/encoding.md#value-bytes-per-column-type, rowcodec encodeInt/encodeUint) -------------


def encode_compact_int(v: int) -> bytes:
    for width, code in _INT_WIDTHS.items():
        if -(1 << (8 * width - 1)) <= v < (1 << (8 * width - 1)):
            return struct.pack("<" + code, v)
    raise InputError(f"integer {v} does not fit in int64")


def encode_compact_uint(v: int) -> bytes:
    for width, code in _UINT_WIDTHS.items():
        if 0 <= v < (1 << (8 * width)):
            return struct.pack("<" + code, v)
    raise InputError(f"integer {v} does not fit in uint64")


def decode_compact_int(data: bytes, signed: bool) -> int:
    code = (_INT_WIDTHS if signed else _UINT_WIDTHS).get(len(data))
    if code is None:
        raise InputError(f"compact integer has {len(data)} bytes; expected 1, 2, 4 or 8")
    return struct.unpack("<" + code, data)[0]


# --- pieces of the value model shared by all encodings -------------------------------------


def _text(raw: bytes, ft: FieldType) -> str | bytes:
    if mt.is_binary_string(ft):
        return bytes(raw)
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{_type_name(ft)} value is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def _text_bytes(value: Any, ft: FieldType) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise InputError(f"{_type_name(ft)} value must be str or bytes, got {type(value).__name__}")


def _elems(ft: FieldType) -> list[str]:
    return list(ft.elems or [])


def enum_name(index: int, ft: FieldType) -> str:
    """ENUM values are 1-based indexes into Elems; 0 is the empty "error" value (docs/encoding.md#value-bytes-per-column-type)."""
    if index == 0:
        return ""
    elems = _elems(ft)
    if not 1 <= index <= len(elems):
        raise InputError(f"enum index {index} outside 1..{len(elems)}")
    return elems[index - 1]


def enum_index(value: Any, ft: FieldType) -> int:
    if value == "":
        return 0
    elems = _elems(ft)
    if isinstance(value, str):
        for i, elem in enumerate(elems, 1):
            if elem == value:
                return i
        for i, elem in enumerate(elems, 1):  # MySQL matches enum members case-insensitively
            if elem.lower() == value.lower():
                return i
    raise InputError(f"{value!r} is not a member of enum {elems}")


def set_names(bits: int, ft: FieldType) -> str:
    """SET values are bitmasks: bit i selects Elems[i] (docs/encoding.md#value-bytes-per-column-type)."""
    elems = _elems(ft)
    if bits >> len(elems):
        raise InputError(f"set bitmask {bits:#x} has bits beyond its {len(elems)} members")
    return ",".join(elem for i, elem in enumerate(elems) if bits >> i & 1)


def set_bits(value: Any, ft: FieldType) -> int:
    if not isinstance(value, str):
        raise InputError(f"set value must be a comma-joined str, got {type(value).__name__}")
    lowered = [e.lower() for e in _elems(ft)]
    bits = 0
    for part in filter(None, value.split(",")):
        try:
            bits |= 1 << lowered.index(part.lower())
        except ValueError:
            raise InputError(f"{part!r} is not a member of set {_elems(ft)}") from None
    return bits


def _narrow(ft: FieldType, f: float) -> float:
    """FLOAT columns are float32 values carried as float64 (docs/encoding.md#value-bytes-per-column-type). A stored double beyond float32
    range becomes ±Inf, as Go's float32() conversion in rowcodec's decoder makes it."""
    if ft.tp != mt.TYPE_FLOAT:
        return f
    try:
        return _F32.unpack(_F32.pack(f))[0]
    except OverflowError:
        return math.copysign(math.inf, f)


def _float_column_value(value: Any, ft: FieldType) -> float:
    """A value to write into a FLOAT/DOUBLE column; FLOAT refuses what float32 cannot hold."""
    f = _float_value(value, ft)
    narrowed = _narrow(ft, f)
    if math.isinf(narrowed) and not math.isinf(f):
        raise InputError(f"value {f!r} is out of range for FLOAT (float32)")
    return narrowed


def _fsp(ft: FieldType) -> int:
    return max(ft.decimal, 0)


def _decimal_shape(ft: FieldType) -> tuple[int, int]:
    """Datum Length/Frac come from the column (`convertToMysqlDecimal`); -1 means unspecified."""
    if ft.flen > 0 and ft.decimal >= 0:
        return ft.flen, ft.decimal
    return 0, 0


def _int_value(value: Any, ft: FieldType) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{_type_name(ft)} value must be int, got {type(value).__name__}")
    return value


def _float_value(value: Any, ft: FieldType) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{_type_name(ft)} value must be float, got {type(value).__name__}")
    return float(value)


def _decimal_value(value: Any, ft: FieldType) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (Decimal, int)):
        raise InputError(f"decimal value must be Decimal or int, got {type(value).__name__}")
    return Decimal(value)


def _duration_value(value: Any) -> int:
    if not isinstance(value, timedelta):
        raise InputError(f"time value must be timedelta, got {type(value).__name__}")
    return duration_to_nanos(value)


def _vector_bytes(value: Any) -> bytes:
    floats = list(value)
    return struct.pack(f"<I{len(floats)}f", len(floats), *floats)


def _vector_value(raw: bytes) -> list[float]:
    if len(raw) < 4:
        raise InputError(f"vector value truncated: {len(raw)} bytes")
    count = int.from_bytes(raw[:4], "little")
    if len(raw) != 4 + 4 * count:
        raise InputError(f"vector of {count} floats needs {4 + 4 * count} bytes, got {len(raw)}")
    return list(struct.unpack(f"<{count}f", raw[4:]))


# --- row format v2 data area (docs/encoding.md#value-bytes-per-column-type) ------------------------------------


def decode_value(data: bytes, ft: FieldType) -> Any:
    """One not-null column value from the row-v2 data area."""
    tp = ft.tp
    if tp in mt.INTEGER_TYPES:
        return decode_compact_int(data, signed=not mt.is_unsigned(ft.flag))
    if tp == mt.TYPE_YEAR:
        return decode_compact_int(data, signed=True)
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        if len(data) != 8:
            raise InputError(f"{_type_name(ft)} value has {len(data)} bytes; expected 8")
        return _narrow(ft, decode_float(data)[0])
    if tp in mt.STRING_TYPES:
        return _text(data, ft)
    if tp == mt.TYPE_NEWDECIMAL:
        value, end = decode_decimal_payload(data, 0)
        if end != len(data):
            raise InputError(f"decimal value has {len(data) - end} extra bytes after byte {end}")
        return value
    if tp in _PACKED_TIME_TYPES:
        return unpack_time(decode_compact_int(data, signed=False), tp, _fsp(ft))
    if tp == mt.TYPE_DURATION:
        return duration_from_nanos(decode_compact_int(data, signed=True))
    if tp == mt.TYPE_ENUM:
        return enum_name(decode_compact_int(data, signed=False), ft)
    if tp == mt.TYPE_SET:
        return set_names(decode_compact_int(data, signed=False), ft)
    if tp == mt.TYPE_BIT:
        return decode_compact_int(data, signed=False)
    if tp == mt.TYPE_JSON:
        return decode_json_binary(bytes(data))
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        return _vector_value(bytes(data))
    raise InputError(f"unsupported column type code {tp}")


def encode_value(value: Any, ft: FieldType) -> bytes:
    """Row-v2 data-area bytes of a not-null value, as TiDB's `encodeValueDatum` writes them."""
    tp = ft.tp
    if tp in mt.INTEGER_TYPES:
        v = _int_value(value, ft)
        return encode_compact_uint(v) if mt.is_unsigned(ft.flag) else encode_compact_int(v)
    if tp == mt.TYPE_YEAR:
        return encode_compact_int(_int_value(value, ft))
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return encode_float(_float_column_value(value, ft))
    if tp in mt.STRING_TYPES:
        return _text_bytes(value, ft)
    if tp == mt.TYPE_NEWDECIMAL:
        return encode_decimal_payload(_decimal_value(value, ft), *_decimal_shape(ft))
    if tp in _PACKED_TIME_TYPES:
        return encode_compact_uint(pack_time(value, tp, _fsp(ft)))
    if tp == mt.TYPE_DURATION:
        return encode_compact_int(_duration_value(value))
    if tp == mt.TYPE_ENUM:
        return encode_compact_uint(enum_index(value, ft))
    if tp == mt.TYPE_SET:
        return encode_compact_uint(set_bits(value, ft))
    if tp == mt.TYPE_BIT:
        return encode_compact_uint(_int_value(value, ft))
    if tp == mt.TYPE_JSON:
        return encode_json_binary(value)
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        return _vector_bytes(value)
    raise InputError(f"unsupported column type code {tp}")


# --- flagged datums: keys, common handles, row v1 (docs/encoding.md#datum-flags-key-form-versus-value-form, docs/encoding.md#row-value-format-v1) ----------


def _expect(datum: Datum, ft: FieldType, *flags: int) -> None:
    if datum.flag not in flags:
        raise InputError(f"datum flag {datum.flag} cannot hold a {_type_name(ft)} value")


def _datum_int(datum: Datum, ft: FieldType) -> int:
    _expect(datum, ft, INT_FLAG, UINT_FLAG, VARINT_FLAG, UVARINT_FLAG)
    value = datum.value
    if mt.is_unsigned(ft.flag) and value < 0:  # an unsigned handle stored as its int64 bit pattern
        return value & _U64
    return value


def value_from_datum(datum: Datum, ft: FieldType) -> Any:
    """Unflatten a datum into the column's Python value (`DecodeOne` + `Unflatten`)."""
    if datum.flag == NIL_FLAG:
        return None
    tp = ft.tp
    if tp in mt.INTEGER_TYPES or tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        return _datum_int(datum, ft)
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        _expect(datum, ft, FLOAT_FLAG)
        return _narrow(ft, datum.value)
    if tp in mt.STRING_TYPES:
        _expect(datum, ft, BYTES_FLAG, COMPACT_BYTES_FLAG)
        return _text(datum.value, ft)
    if tp == mt.TYPE_NEWDECIMAL:
        _expect(datum, ft, DECIMAL_FLAG)
        return datum.value
    if tp in _PACKED_TIME_TYPES:
        _expect(datum, ft, UINT_FLAG, UVARINT_FLAG)
        return unpack_time(datum.value, tp, _fsp(ft))
    if tp == mt.TYPE_DURATION:
        _expect(datum, ft, DURATION_FLAG, INT_FLAG, VARINT_FLAG)
        return duration_from_nanos(datum.value)
    if tp == mt.TYPE_ENUM:
        return enum_name(_datum_int(datum, ft), ft)
    if tp == mt.TYPE_SET:
        return set_names(_datum_int(datum, ft), ft)
    if tp == mt.TYPE_JSON:
        _expect(datum, ft, JSON_FLAG)
        return decode_json_binary(datum.value)
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        _expect(datum, ft, VECTOR_FLOAT32_FLAG)
        return _vector_value(datum.value)
    raise InputError(f"unsupported column type code {tp}")


def collation_key(value: bytes, ft: FieldType, new_collation: bool) -> bytes:
    """The bytes an index key or common handle holds for a string (docs/encoding.md#datum-flags-key-form-versus-value-form `ImmutableKey`).

    Only binary and `_bin` collations are supported: `_ci` weight strings are not implemented.
    """
    if not new_collation or mt.is_binary_string(ft) or ft.collate == _NO_PAD_BIN_COLLATION:
        return value
    if ft.collate.endswith("_bin"):
        return value.rstrip(b" ")  # PAD SPACE _bin collations trim trailing spaces
    raise InputError(f"index/handle encoding for collation {ft.collate!r} is not supported (only binary and *_bin)")


def encode_key_datum(value: Any, ft: FieldType, new_collation: bool = True) -> bytes:
    """`codec.EncodeKey` of one column value: the comparable form in index keys and handles."""
    if value is None:
        return bytes([NIL_FLAG])
    tp = ft.tp
    if tp in mt.INTEGER_TYPES:
        v = _int_value(value, ft)
        return encode_datum(UINT_FLAG, v) if mt.is_unsigned(ft.flag) else encode_datum(INT_FLAG, v)
    if tp == mt.TYPE_YEAR:
        return encode_datum(INT_FLAG, _int_value(value, ft))
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return encode_datum(FLOAT_FLAG, _float_column_value(value, ft))
    if tp in mt.STRING_TYPES:
        return encode_datum(BYTES_FLAG, collation_key(_text_bytes(value, ft), ft, new_collation))
    if tp == mt.TYPE_NEWDECIMAL:
        return bytes([DECIMAL_FLAG]) + encode_decimal_payload(_decimal_value(value, ft), *_decimal_shape(ft))
    if tp in _PACKED_TIME_TYPES:
        return encode_datum(UINT_FLAG, pack_time(value, tp, _fsp(ft)))
    if tp == mt.TYPE_DURATION:
        return encode_datum(DURATION_FLAG, _duration_value(value))
    if tp == mt.TYPE_ENUM:
        return encode_datum(UINT_FLAG, enum_index(value, ft))
    if tp == mt.TYPE_SET:
        return encode_datum(UINT_FLAG, set_bits(value, ft))
    if tp == mt.TYPE_BIT:
        return encode_datum(UINT_FLAG, _int_value(value, ft))
    raise InputError(f"{_type_name(ft)} values cannot be encoded as key datums")


def encode_flat_datum(value: Any, ft: FieldType) -> bytes:
    """`codec.EncodeValue` of a flattened value, as row format v1 writes it (docs/encoding.md#row-value-format-v1)."""
    if value is None:
        return bytes([NIL_FLAG])
    tp = ft.tp
    if tp in mt.INTEGER_TYPES:
        v = _int_value(value, ft)
        return encode_datum(UVARINT_FLAG, v) if mt.is_unsigned(ft.flag) else encode_datum(VARINT_FLAG, v)
    if tp == mt.TYPE_YEAR:
        return encode_datum(VARINT_FLAG, _int_value(value, ft))
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return encode_datum(FLOAT_FLAG, _float_column_value(value, ft))
    if tp in mt.STRING_TYPES:
        return encode_datum(COMPACT_BYTES_FLAG, _text_bytes(value, ft))
    if tp == mt.TYPE_NEWDECIMAL:
        return bytes([DECIMAL_FLAG]) + encode_decimal_payload(_decimal_value(value, ft), *_decimal_shape(ft))
    if tp in _PACKED_TIME_TYPES:
        return encode_datum(UVARINT_FLAG, pack_time(value, tp, _fsp(ft)))
    if tp == mt.TYPE_DURATION:
        return encode_datum(VARINT_FLAG, _duration_value(value))
    if tp == mt.TYPE_ENUM:
        return encode_datum(UVARINT_FLAG, enum_index(value, ft))
    if tp == mt.TYPE_SET:
        return encode_datum(UVARINT_FLAG, set_bits(value, ft))
    if tp == mt.TYPE_BIT:
        return encode_datum(UVARINT_FLAG, _int_value(value, ft))
    if tp == mt.TYPE_JSON:
        return encode_datum(JSON_FLAG, encode_json_binary(value))
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        return encode_datum(VECTOR_FLOAT32_FLAG, _vector_bytes(value))
    raise InputError(f"unsupported column type code {tp}")


def zero_value(ft: FieldType) -> Any:
    """The value of a missing NOT NULL column with no default (`GetZeroValue`, docs/encoding.md#handle-columns-_tidb_rowid-and-missing-columns)."""
    tp = ft.tp
    if tp in mt.INTEGER_TYPES or tp in (mt.TYPE_YEAR, mt.TYPE_BIT):
        return 0
    if tp in (mt.TYPE_FLOAT, mt.TYPE_DOUBLE):
        return 0.0
    if tp in mt.STRING_TYPES:
        return b"" if mt.is_binary_string(ft) else ""
    if tp == mt.TYPE_NEWDECIMAL:
        return Decimal(0).scaleb(-_fsp(ft))
    if tp in _PACKED_TIME_TYPES:
        return MySQLTime(0, 0, 0, tp=tp)
    if tp == mt.TYPE_DURATION:
        return timedelta(0)
    if tp == mt.TYPE_ENUM:
        elems = _elems(ft)
        return elems[0] if elems else ""
    if tp == mt.TYPE_SET:
        return ""
    if tp == mt.TYPE_JSON:
        return JSON_NULL
    if tp == mt.TYPE_TIDB_VECTOR_FLOAT32:
        return []
    raise InputError(f"unsupported column type code {tp}")
