"""Property tests for TiDB's binary JSON (docs/encoding.md#binary-json): encode -> decode is the identity,
the text form parses back to the value, and arbitrary or corrupted documents decode or raise one
InputError line, in time linear in their size."""

from __future__ import annotations

import json
import struct

from fuzz_support import decodes_or_rejects
from hypothesis import example, given
from hypothesis import strategies as st

from tidelake.codec.json_binary import (
    decode_json_binary,
    encode_json_binary,
    json_text,
    json_text_from_value,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.text(max_size=10)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20,
)


def shared_child_bomb(levels: int) -> bytes:
    """An array whose two entries point at one child, `levels` deep: ~18 bytes a level that
    expand to 2^levels values (before the fix decoding it never finished)."""
    doc = struct.pack("<II", 0, 8)  # empty array
    for _ in range(levels):
        doc = struct.pack("<II", 2, 18 + len(doc)) + (b"\x03" + struct.pack("<I", 18)) * 2 + doc
    return b"\x03" + doc


@given(json_values)
def test_round_trip(value):
    data = encode_json_binary(value)
    decoded = decode_json_binary(data)
    assert (None if value is None else decoded) == value
    assert json_text(data) == json_text_from_value(value)
    assert json.loads(json_text(data)) == value


@given(st.binary(max_size=80))
@example(shared_child_bomb(60))
# an object whose only value is the object itself (offset 0)
@example(b"\x01" + struct.pack("<II", 1, 22) + struct.pack("<IH", 0, 8) + struct.pack("<BI", 1, 0) + bytes(3))
def test_arbitrary_bytes(data):
    decodes_or_rejects(decode_json_binary, data)
    decodes_or_rejects(json_text, data)


@given(json_values, st.data())
def test_corrupted_documents(value, data):
    """One byte changed or the tail cut off a valid document: headers, offsets and lengths lie."""
    doc = bytearray(encode_json_binary(value))
    if data.draw(st.booleans(), label="truncate"):
        doc = doc[: data.draw(st.integers(0, len(doc) - 1), label="length")]
    else:
        doc[data.draw(st.integers(0, len(doc) - 1), label="at")] = data.draw(st.integers(0, 255), label="byte")
    decodes_or_rejects(decode_json_binary, bytes(doc))
    decodes_or_rejects(json_text, bytes(doc))
