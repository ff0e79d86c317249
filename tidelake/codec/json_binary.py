"""TiDB's binary JSON (the stored form of JSON column values) and its canonical text form, as
docs/encoding.md#binary-json and pingcap/tidb `pkg/types/json_binary.go` define them. Re-encoding
a decoded document is byte-exact (opaque and temporal values keep their type code and bytes), and
a JSON `null` document stays distinct from SQL NULL. Owner: the codec.

More: docs/internals.md#json_binary.
"""

import base64
import codecs
import struct
from decimal import Context, Decimal
from typing import Any

from tidelake.codec.number import decode_uvarint, encode_uvarint
from tidelake.errors import InputError

# docs/encoding.md#binary-json — type codes
TYPE_OBJECT = 0x01
TYPE_ARRAY = 0x03
TYPE_LITERAL = 0x04
TYPE_INT64 = 0x09
TYPE_UINT64 = 0x0A
TYPE_FLOAT64 = 0x0B
TYPE_STRING = 0x0C
TYPE_OPAQUE = 0x0D
TYPE_DATE = 0x0E
TYPE_DATETIME = 0x0F
TYPE_TIMESTAMP = 0x10
TYPE_DURATION = 0x11

LITERAL_NULL = 0x00
LITERAL_TRUE = 0x01
LITERAL_FALSE = 0x02

_HEADER_SIZE = 8  # element count u32 + total size u32
_KEY_ENTRY_SIZE = 6  # key offset u32 + key length u16
_VALUE_ENTRY_SIZE = 5  # type u8 + offset-or-inlined u32
_MAX_KEY_LEN = 0xFFFF
_MAX_DEPTH = 100  # TiDB maxJSONDepth
_NUMBER_FORMATS = {TYPE_INT64: "<q", TYPE_UINT64: "<Q", TYPE_FLOAT64: "<d"}
_TEMPORAL_SIZES = {TYPE_DATE: 8, TYPE_DATETIME: 8, TYPE_TIMESTAMP: 8, TYPE_DURATION: 12}
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


class _JSONNull:
    """Singleton for a whole JSON document that is `null` (distinct from SQL NULL)."""

    _instance: "_JSONNull | None" = None

    def __new__(cls) -> "_JSONNull":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "JSON_NULL"

    def __bool__(self) -> bool:
        return False


JSON_NULL = _JSONNull()


class JSONOpaque(str):
    """An opaque JSON value (binary data tagged with a MySQL type code); its text is TiDB's rendering."""

    type_code: int
    data: bytes

    def __new__(cls, type_code: int, data: bytes) -> "JSONOpaque":
        text = f"base64:type{type_code}:{base64.b64encode(data).decode('ascii')}"
        obj = super().__new__(cls, text)
        obj.type_code, obj.data = type_code, bytes(data)
        return obj


class JSONTemporal(str):
    """A JSON date/datetime/timestamp/time value; its text is TiDB's rendering (always 6 fractional digits)."""

    type_code: int
    raw: bytes

    def __new__(cls, type_code: int, raw: bytes) -> "JSONTemporal":
        obj = super().__new__(cls, _temporal_text(type_code, raw))
        obj.type_code, obj.raw = type_code, bytes(raw)
        return obj


def _temporal_text(type_code: int, raw: bytes) -> str:
    """Text of TiDB's `jsonMarshalTimeTo`/`jsonMarshalDurationTo` (fsp forced to 6)."""
    if type_code == TYPE_DURATION:
        nanos = struct.unpack_from("<q", raw)[0]
        sign = "-" if nanos < 0 else ""
        micros = abs(nanos) // 1000
        seconds, micro = divmod(micros, 1_000_000)
        hours, rest = divmod(seconds, 3600)
        return f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}.{micro:06d}"
    # Date/datetime/timestamp hold TiDB's in-memory CoreTime bit fields (pkg/types/core_time.go),
    # not the packed form of row values.
    core = struct.unpack_from("<Q", raw)[0]
    year, month, day = (core >> 50) & 0x3FFF, (core >> 46) & 0xF, (core >> 41) & 0x1F
    hour, minute, second = (core >> 36) & 0x1F, (core >> 30) & 0x3F, (core >> 24) & 0x3F
    micro = (core >> 4) & 0xFFFFF
    day_text = f"{year:04d}-{month:02d}-{day:02d}"
    if type_code == TYPE_DATE:
        return day_text
    return f"{day_text} {hour:02d}:{minute:02d}:{second:02d}.{micro:06d}"


class _StoredString:
    """A string kept as its stored bytes, so `json_text` can escape bad UTF-8 exactly as TiDB does."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


def _slice(buf: memoryview, start: int, length: int, what: str) -> bytes:
    if start < 0 or start + length > len(buf):
        raise InputError(f"binary JSON {what} at {start}..{start + length} runs past the value end ({len(buf)})")
    return bytes(buf[start : start + length])


class _Budget:
    """Bytes the decoded values may still occupy. TiDB writes every value at its own offset, so a
    document's values fit in its bytes; entries aimed at one shared child would otherwise expand
    a few hundred bytes into 2^depth values."""

    __slots__ = ("left", "total")

    def __init__(self, total: int) -> None:
        self.left = self.total = total

    def spend(self, n: int, what: str) -> None:
        self.left -= n
        if self.left < 0:
            raise InputError(
                f"binary JSON {what} overlaps other values: the elements decode to more than the "
                f"document's {self.total} bytes (entries reuse offsets)"
            )


def _decode(type_code: int, buf: memoryview, raw_strings: bool, depth: int, budget: _Budget) -> Any:
    """Decode the value of `type_code` that starts at buf[0] (a view: children are not copied)."""
    if depth > _MAX_DEPTH + 1:
        raise InputError(f"binary JSON nests deeper than {_MAX_DEPTH} levels")
    if type_code == TYPE_LITERAL:
        literal = _slice(buf, 0, 1, "literal")[0]
        if literal not in (LITERAL_NULL, LITERAL_TRUE, LITERAL_FALSE):
            raise InputError(f"binary JSON literal byte {literal:#04x} is not null/true/false")
        return None if literal == LITERAL_NULL else literal == LITERAL_TRUE
    if type_code in (TYPE_INT64, TYPE_UINT64, TYPE_FLOAT64):
        budget.spend(8, "number")
        return struct.unpack(_NUMBER_FORMATS[type_code], _slice(buf, 0, 8, "number"))[0]
    if type_code == TYPE_STRING:
        length, pos = decode_uvarint(buf, 0)
        data = _slice(buf, pos, length, "string")
        budget.spend(pos + length, "string")
        return _StoredString(data) if raw_strings else data.decode("utf-8", "replace")
    if type_code == TYPE_OPAQUE:
        length, pos = decode_uvarint(buf, 1)
        data = _slice(buf, pos, length, "opaque")
        budget.spend(pos + length, "opaque")
        return JSONOpaque(_slice(buf, 0, 1, "opaque type")[0], data)
    if type_code in _TEMPORAL_SIZES:
        budget.spend(_TEMPORAL_SIZES[type_code], "time value")
        return JSONTemporal(type_code, _slice(buf, 0, _TEMPORAL_SIZES[type_code], "time value"))
    if type_code in (TYPE_OBJECT, TYPE_ARRAY):
        return _decode_container(type_code, buf, raw_strings, depth, budget)
    raise InputError(f"unknown binary JSON type code {type_code:#04x}")


def _decode_container(type_code: int, buf: memoryview, raw_strings: bool, depth: int, budget: _Budget) -> dict | list:
    count, size = struct.unpack("<II", _slice(buf, 0, _HEADER_SIZE, "container header"))
    if size > len(buf):
        raise InputError(f"binary JSON container claims {size} bytes but only {len(buf)} remain")
    doc = buf[:size]
    is_object = type_code == TYPE_OBJECT
    value_entries = _HEADER_SIZE + (count * _KEY_ENTRY_SIZE if is_object else 0)
    _slice(doc, 0, value_entries + count * _VALUE_ENTRY_SIZE, f"{count} entries")
    budget.spend(value_entries + count * _VALUE_ENTRY_SIZE, "container")
    values = []
    for i in range(count):
        entry = value_entries + i * _VALUE_ENTRY_SIZE
        elem_type = doc[entry]
        if elem_type == TYPE_LITERAL:
            values.append(_decode(TYPE_LITERAL, doc[entry + 1 : entry + 2], raw_strings, depth + 1, budget))
            continue
        (offset,) = struct.unpack_from("<I", doc, entry + 1)
        if offset >= size:
            raise InputError(f"binary JSON element {i} offset {offset} is outside its container ({size} bytes)")
        values.append(_decode(elem_type, doc[offset:], raw_strings, depth + 1, budget))
    if not is_object:
        return values
    obj: dict = {}
    for i in range(count):
        key_off, key_len = struct.unpack_from("<IH", doc, _HEADER_SIZE + i * _KEY_ENTRY_SIZE)
        key = _slice(doc, key_off, key_len, f"key {i}")
        budget.spend(key_len, f"key {i}")
        obj[key.decode("utf-8", "replace")] = values[i]
    return obj


def _check_document(data: bytes) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(f"binary JSON must be bytes, got {type(data).__name__}")
    if len(data) < 2:
        raise InputError(f"binary JSON needs a type byte and a value, got {len(data)} byte(s)")


def decode_json_binary(data: bytes) -> Any:
    """Decode a stored JSON document (type byte + value) into the Python value model above."""
    _check_document(data)
    view = memoryview(bytes(data))
    value = _decode(view[0], view[1:], raw_strings=False, depth=0, budget=_Budget(len(view)))
    return JSON_NULL if value is None else value


def json_text(data: bytes) -> str:
    """TiDB's text of a stored JSON document, byte for byte what `SELECT json_col` prints."""
    _check_document(data)
    view = memoryview(bytes(data))
    return _render(_decode(view[0], view[1:], raw_strings=True, depth=0, budget=_Budget(len(view))))


def json_text_from_value(value: Any) -> str:
    """TiDB's text for a Python JSON value (keys in TiDB's stored order), e.g. for Spark STRING columns."""
    return _render(value)


# --- text rendering (pkg/types/json_binary.go marshalTo) -------------------------------------

_BAD_BYTE = "\udfff"  # cannot come out of a successful UTF-8 decode; marks one invalid byte


def _mark_bad_byte(exc: UnicodeError) -> tuple[str, int]:
    # Go's utf8.DecodeRune consumes one byte of an invalid sequence; resume right after it.
    return _BAD_BYTE, exc.start + 1


codecs.register_error("tidelake_json_bad_byte", _mark_bad_byte)

_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}
_ESCAPES.update({ord("\b"): "\\b", ord("\f"): "\\f", 0x2028: "\\u2028", 0x2029: "\\u2029", ord(_BAD_BYTE): "\\ufffd"})
_ESCAPES.update({c: f"\\u{c:04x}" for c in range(0x20) if c not in _ESCAPES})


def _quote(data: bytes) -> str:
    return '"' + data.decode("utf-8", "tidelake_json_bad_byte").translate(_ESCAPES) + '"'


def _quote_str(text: str) -> str:
    return _quote(text.encode("utf-8", "surrogatepass"))


def _float_text(f: float) -> str:
    """Go's shortest float formatting as TiDB tweaks it: fixed notation in [1e-15, 1e15), else 'e'."""
    if f != f or f in (float("inf"), float("-inf")):
        raise InputError(f"JSON cannot hold the float {f}")
    shortest = Decimal(repr(f))
    if f != 0 and not 1e-15 <= abs(f) < 1e15:
        sign, digits, exponent = shortest.normalize(Context(prec=30)).as_tuple()
        mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{exponent + len(digits) - 1}"
    text = format(shortest, "f")
    return text if "." in text else text + ".0"


def _render(value: Any) -> str:
    if value is None or value is JSON_NULL:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, _StoredString):
        return _quote(value.data)
    if isinstance(value, str):
        return _quote_str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, dict):
        items = sorted(((_key_bytes(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        return "{" + ", ".join(f"{_quote(k)}: {_render(v)}" for k, v in items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    raise InputError(f"{type(value).__name__} is not a JSON value")


def _key_bytes(key: Any) -> bytes:
    if not isinstance(key, str):
        raise InputError(f"JSON object key {key!r} is not a string")
    return key.encode("utf-8", "surrogatepass")


# --- encoding (pkg/types/json_binary.go appendBinaryJSON) ------------------------------------


def encode_json_binary(value: Any) -> bytes:
    """Stored form (type byte + value) of a Python JSON value, laid out exactly as TiDB writes it.

    Integers in int64 range become int64, larger ones up to 2**64-1 uint64, and beyond that a
    double — the same types TiDB picks when it parses JSON text.
    """
    type_code, body = _encode(value, 0)
    return bytes([type_code]) + body


def _encode(value: Any, depth: int) -> tuple[int, bytes]:
    if depth > _MAX_DEPTH:
        raise InputError(f"JSON value nests deeper than {_MAX_DEPTH} levels")
    if value is None or value is JSON_NULL:
        return TYPE_LITERAL, bytes([LITERAL_NULL])
    if value is True or value is False:
        return TYPE_LITERAL, bytes([LITERAL_TRUE if value else LITERAL_FALSE])
    if isinstance(value, JSONOpaque):
        return TYPE_OPAQUE, bytes([value.type_code]) + encode_uvarint(len(value.data)) + value.data
    if isinstance(value, JSONTemporal):
        return value.type_code, value.raw
    if isinstance(value, str):
        data = value.encode("utf-8")
        return TYPE_STRING, encode_uvarint(len(data)) + data
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return TYPE_INT64, struct.pack("<q", value)
        if 0 <= value <= _UINT64_MAX:
            return TYPE_UINT64, struct.pack("<Q", value)
        return _encode(float(value), depth)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError(f"JSON cannot hold the float {value}")
        return TYPE_FLOAT64, struct.pack("<d", value)
    if isinstance(value, (list, tuple)):
        return TYPE_ARRAY, _encode_container([], list(value), depth)
    if isinstance(value, dict):
        items = sorted(((_key_bytes(k), v) for k, v in value.items()), key=lambda kv: kv[0])
        for key, _ in items:
            if len(key) > _MAX_KEY_LEN:
                raise InputError(f"JSON object key of {len(key)} bytes exceeds TiDB's limit of {_MAX_KEY_LEN}")
        return TYPE_OBJECT, _encode_container([k for k, _ in items], [v for _, v in items], depth)
    raise InputError(f"{type(value).__name__} is not a JSON value")


def _encode_container(keys: list[bytes], values: list[Any], depth: int) -> bytes:
    """Header, key entries (objects), value entries, key bytes, then values; offsets from the container start."""
    count = len(values)
    key_entries_end = _HEADER_SIZE + len(keys) * _KEY_ENTRY_SIZE
    data_start = key_entries_end + count * _VALUE_ENTRY_SIZE
    key_entries = bytearray()
    key_data = bytearray()
    for key in keys:
        key_entries += struct.pack("<IH", data_start + len(key_data), len(key))
        key_data += key
    value_entries = bytearray()
    value_data = bytearray()
    values_start = data_start + len(key_data)
    for item in values:
        elem_type, body = _encode(item, depth + 1)
        if elem_type == TYPE_LITERAL:
            value_entries += bytes([TYPE_LITERAL]) + body + bytes(3)
            continue
        value_entries += struct.pack("<BI", elem_type, values_start + len(value_data))
        value_data += body
    total = values_start + len(value_data)
    if total > 0xFFFFFFFF:
        raise InputError(f"JSON container of {total} bytes exceeds the 4 GiB binary JSON limit")
    return struct.pack("<II", count, total) + key_entries + value_entries + key_data + value_data
