"""Binary JSON: the TiKV test vector (docs/encoding.md#binary-json), TiDB's layout and text rules, round trips."""

import base64
import json
import random
import struct

import pytest

from tidelake.codec.json_binary import (
    JSON_NULL,
    TYPE_DATE,
    TYPE_DATETIME,
    TYPE_DURATION,
    JSONOpaque,
    JSONTemporal,
    decode_json_binary,
    encode_json_binary,
    json_text,
    json_text_from_value,
)
from tidelake.errors import InputError

# docs/encoding.md#binary-json, from TiKV's tests: {"key":"value"}
KEY_VALUE = bytes.fromhex("01" "01000000" "1c000000" "13000000" "0300" "0c" "16000000") + b"key" + b"\x05value"


def test_tikv_vector() -> None:
    assert encode_json_binary({"key": "value"}) == KEY_VALUE
    assert decode_json_binary(KEY_VALUE) == {"key": "value"}
    assert json_text(KEY_VALUE) == '{"key": "value"}'


def test_scalars_layout() -> None:
    assert encode_json_binary(True) == b"\x04\x01"
    assert encode_json_binary(False) == b"\x04\x02"
    assert encode_json_binary(None) == b"\x04\x00"
    assert encode_json_binary(-2) == b"\x09" + struct.pack("<q", -2)
    assert encode_json_binary(2**63) == b"\x0a" + struct.pack("<Q", 2**63)
    assert encode_json_binary(1.5) == b"\x0b" + struct.pack("<d", 1.5)
    assert encode_json_binary("é") == b"\x0c\x02" + "é".encode()


def test_array_inlines_only_literals() -> None:
    data = encode_json_binary([True, 7])
    # count, size, entry(literal true inline), entry(int64 at offset 18), 8 bytes of int
    header = struct.pack("<II", 2, 26)
    assert data == b"\x03" + header + b"\x04\x01\x00\x00\x00" + struct.pack("<BI", 9, 18) + struct.pack("<q", 7)


def test_object_keys_sorted_bytewise() -> None:
    value = {"b": 1, "a": 2, "é": 3, "Z": 4, "aa": 5}
    decoded = decode_json_binary(encode_json_binary(value))
    assert list(decoded) == ["Z", "a", "aa", "b", "é"]
    assert decoded == value


def test_top_level_null_is_distinct_from_sql_null() -> None:
    assert decode_json_binary(b"\x04\x00") is JSON_NULL
    assert decode_json_binary(encode_json_binary([None])) == [None]
    assert encode_json_binary(JSON_NULL) == b"\x04\x00"
    assert json_text(b"\x04\x00") == "null"


def test_text_format_matches_tidb() -> None:
    value = {"b": [True, None, False], "a": 1, "c": {"x": -2.5, "y": "q\"\\\n\t\x01<&>\u2028"}}
    expected = '{"a": 1, "b": [true, null, false], "c": {"x": -2.5, "y": "q\\"\\\\\\n\\t\\u0001<&>\\u2028"}}'
    assert json_text(encode_json_binary(value)) == expected
    assert json_text_from_value(value) == expected


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1.0"),
        (100.0, "100.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1e-5, "0.00001"),
        (123456789012345.6, "123456789012345.6"),
        (1e15, "1e15"),
        (1.5e300, "1.5e300"),
        (1e-15, "0.000000000000001"),
        (1e-16, "1e-16"),
        (-2.5e-20, "-2.5e-20"),
        (2**64 * 4, "7.378697629483821e19"),
    ],
)
def test_float_text(number: float, text: str) -> None:
    assert json_text(encode_json_binary(number)) == text


def test_invalid_utf8_rendered_like_tidb() -> None:
    stored = b"\x0c\x05a\xffb\xe2\x82"
    assert json_text(stored) == '"a\\ufffdb\\ufffd\\ufffd"'
    assert decode_json_binary(stored) == "a\ufffdb\ufffd"
    assert json_text(b"\x0c\x03\xef\xbf\xbd") == '"\ufffd"'


def test_opaque_and_temporal_values_round_trip() -> None:
    opaque = b"\x0d\x0f\x02\x01\x02"  # VARCHAR-typed opaque bytes 01 02
    value = decode_json_binary(opaque)
    assert isinstance(value, JSONOpaque) and value == "base64:type15:" + base64.b64encode(b"\x01\x02").decode()
    assert encode_json_binary(value) == opaque
    assert json_text(opaque) == '"base64:type15:AQI="'
    core = (2024 << 50) | (1 << 46) | (2 << 41) | (3 << 36) | (4 << 30) | (5 << 24) | (6 << 4)
    dt = bytes([TYPE_DATETIME]) + struct.pack("<Q", core)
    assert decode_json_binary(dt) == "2024-01-02 03:04:05.000006"
    assert json_text(bytes([TYPE_DATE]) + struct.pack("<Q", core)) == '"2024-01-02"'
    duration = bytes([TYPE_DURATION]) + struct.pack("<qI", -(3600 * 10**9 + 500_000), 3)
    decoded = decode_json_binary(duration)
    assert isinstance(decoded, JSONTemporal) and decoded == "-01:00:00.000500"
    assert encode_json_binary([decoded])[-12:] == duration[1:]


def _random_json(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == 2:
        return rng.randint(2**63, 2**64 - 1)
    if kind == 3:
        return rng.uniform(-1e6, 1e6)
    if kind in (4, 5):
        return "".join(rng.choice("ab\"\\\n é漢😀") for _ in range(rng.randint(0, 12)))
    if kind in (6, 7):
        keys = ["".join(rng.choice("xyzé") for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(0, 5))]
        return {key: _random_json(rng, depth + 1) for key in keys}
    return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 5))]


def test_random_round_trips_agree_with_python_json() -> None:
    rng = random.Random(11)
    for _ in range(300):
        value = _random_json(rng)
        data = encode_json_binary(value)
        decoded = decode_json_binary(data)
        assert decoded == value or (value is None and decoded is JSON_NULL)
        assert encode_json_binary(decoded) == data
        assert json.loads(json_text(data)) == json.loads(json.dumps(value))


def test_large_document_uses_32_bit_offsets() -> None:
    value = {f"k{i:05d}": "v" * 100 for i in range(1000)}
    value["nested"] = [list(range(50))] * 20
    data = encode_json_binary(value)
    assert len(data) > 100_000
    assert decode_json_binary(data) == value


def test_corrupt_input_raises() -> None:
    truncated_lengths = (b"\x0c\x80", b"\x0d\x0f\xff", b"\x0c" + b"\xff" * 10 + b"\x01")  # varint cut off / > 64 bits
    for bad in (b"", b"\x01", KEY_VALUE[:-3], b"\x02\x00", b"\x04\x07", b"\x0c\x05ab", b"\x01" + struct.pack("<II", 1, 99),
                *truncated_lengths):
        with pytest.raises(InputError):
            decode_json_binary(bad)
    with pytest.raises(InputError, match="float"):
        encode_json_binary(float("nan"))
    with pytest.raises(InputError, match="not a JSON value"):
        encode_json_binary({1, 2})
    with pytest.raises(InputError, match="deeper"):
        encode_json_binary(json.loads("[" * 102 + "]" * 102))
