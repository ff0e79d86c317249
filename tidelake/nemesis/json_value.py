"""A TiDB binary JSON value as a Python object, read without tidelake.codec (docs/encoding.md#binary-json;
pingcap/tidb pkg/types/json_binary.go): a type-code byte, then the value. Objects and arrays hold
`count u32 | size u32`, for objects a (key offset u32, key length u16) per element, then a
(type u8, offset u32) value entry per element; a literal sits in its entry, any other value at
its offset from the container's start. Numbers are little-endian; a string is a uvarint length
and its bytes. Opaque and temporal values are not read: Unchecked.
"""

from __future__ import annotations

import struct
from typing import Any

from tidelake.nemesis.value_errors import RowFormatError, Unchecked

OBJECT, ARRAY, LITERAL, INT64, UINT64, FLOAT64, STRING = 0x01, 0x03, 0x04, 0x09, 0x0A, 0x0B, 0x0C
_LITERALS = {0: None, 1: True, 2: False}
_MAX_DEPTH = 100


def json_value(data: bytes) -> Any:
    if not data:
        raise RowFormatError("empty JSON value")
    return _value(data[0], memoryview(data)[1:], 0, 0)


def _value(code: int, buf: memoryview, at: int, depth: int) -> Any:
    if code in (OBJECT, ARRAY):
        if depth > _MAX_DEPTH:
            raise RowFormatError("JSON nested deeper than 100")
        return _container(code, buf[at:], depth + 1)
    if code == INT64:
        return struct.unpack_from("<q", buf, at)[0]
    if code == UINT64:
        return struct.unpack_from("<Q", buf, at)[0]
    if code == FLOAT64:
        return struct.unpack_from("<d", buf, at)[0]
    if code == STRING:
        length, shift, pos = 0, 0, at
        while True:
            byte = buf[pos]
            pos += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if pos + length > len(buf):
            raise RowFormatError(f"JSON string of {length} bytes runs past its value")
        return bytes(buf[pos:pos + length]).decode("utf-8")
    if code == LITERAL:
        return _literal(buf, at)
    raise Unchecked(f"JSON type code {code:#x}")


def _container(code: int, buf: memoryview, depth: int) -> dict | list:
    count, size = struct.unpack_from("<II", buf, 0)
    if size > len(buf):
        raise RowFormatError(f"JSON container of {size} bytes in {len(buf)}")
    buf = buf[:size]
    entries = 8 + (count * 6 if code == OBJECT else 0)
    values = []
    for i in range(count):
        type_code, offset = struct.unpack_from("<BI", buf, entries + i * 5)
        values.append(_literal(buf, entries + i * 5 + 1) if type_code == LITERAL
                      else _value(type_code, buf, offset, depth))
    if code == ARRAY:
        return values
    keys = []
    for i in range(count):
        key_at, key_len = struct.unpack_from("<IH", buf, 8 + i * 6)
        keys.append(bytes(buf[key_at:key_at + key_len]).decode("utf-8"))
    return dict(zip(keys, values, strict=True))


def _literal(buf: memoryview, at: int) -> Any:
    if buf[at] not in _LITERALS:
        raise RowFormatError(f"JSON literal {buf[at]:#x}")
    return _LITERALS[buf[at]]
