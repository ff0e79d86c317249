"""Meta keys against docs/metadata.md#worked-key-vectors (row 1 is an upstream literal)."""

import pytest

from tidelake.codec import meta_keys as mk
from tidelake.codec.keys import to_region_key
from tidelake.errors import InputError

H = bytes.fromhex


def test_upstream_literal_tid_field():  # tidb TestDecodeAutoIDMeta
    raw = H("6d44423a3536000000fc00000000000000685449443a31303800fe")
    assert mk.hash_key(mk.db_key(56), b"TID:108") == raw
    assert mk.decode_meta_key(raw) == mk.MetaKey("hash", b"DB:56", field=b"TID:108")
    assert mk.parse_table_field(b"TID:108") is None


def test_string_keys():
    raw = H("6d536368656d615665ff7273696f6e4b6579ff0000000000000000f70000000000000073")
    assert mk.string_key(mk.SCHEMA_VERSION_KEY) == raw
    assert to_region_key(raw) == H(
        "6d536368656d6156ff65ff7273696f6e4bff6579ff0000000000ff000000f700000000ff0000007300000000fb"
    )
    assert mk.string_key(mk.NEXT_GLOBAL_ID) == H("6d4e657874476c6f62ff616c494400000000fb0000000000000073")
    assert mk.decode_meta_key(raw) == mk.MetaKey("string", b"SchemaVersionKey")


def test_hash_spans():
    start, end = mk.hash_span(mk.DBS)
    assert start == H("6d4442730000000000fa0000000000000068")
    assert end == H("6d4442730000000000fa0000000000000069")
    assert to_region_key(start) == H("6d44427300000000ff00fa000000000000ff0068000000000000f9")
    assert to_region_key(end) == H("6d44427300000000ff00fa000000000000ff0069000000000000f9")
    assert mk.hash_span(mk.db_key(2)) == (
        H("6d44423a3200000000fb0000000000000068"),
        H("6d44423a3200000000fb0000000000000069"),
    )
    assert to_region_key(mk.hash_prefix(b"DB:2")) == H("6d44423a32000000ff00fb000000000000ff0068000000000000f9")


def test_db_and_table_fields():
    db = H("6d4442730000000000fa000000000000006844423a3200000000fb")
    table = H("6d44423a3200000000fb00000000000000685461626c653a3130ff3400000000000000f8")
    assert mk.db_info_key(2) == db
    assert mk.table_info_key(2, 104) == table
    decoded = mk.decode_meta_key(table)
    assert mk.parse_db_key(decoded.key) == 2 and mk.parse_table_field(decoded.field) == 104
    start, end = mk.hash_span(mk.db_key(2))
    assert start <= table < end
    assert not (start <= mk.table_info_key(20, 104) < end)  # prefix-free: DB:2 vs DB:20


def test_list_keys():
    raw = H("6d44444c4a6f624c69ff7374000000000000f9000000000000006c8000000000000000")
    assert mk.list_key(mk.DDL_JOB_LIST, 0) == raw
    assert mk.decode_meta_key(raw) == mk.MetaKey("list", b"DDLJobList", index=0)
    assert mk.decode_meta_key(mk.list_meta_key(b"x")).kind == "list_meta"


def test_meta_space_and_prefix_next():
    assert (to_region_key(b"m"), to_region_key(mk.prefix_next(b"m"))) == (
        H("6d00000000000000f8"),
        H("6e00000000000000f8"),
    )
    assert mk.prefix_next(b"\x01\xff") == b"\x02\x00"
    assert mk.prefix_next(b"\xff\xff") == b"\xff\xff\x00"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"t", "not a meta key"),
        (H("6d4442730000000000fa000000000000007a"), "unknown type flag 0x7a at byte 10"),
        (mk.string_key(b"k") + b"\x01", "unexpected bytes at byte 18"),
        (H("6d44427300"), "truncated at byte 1"),
    ],
)
def test_bad_meta_keys(raw, message):
    with pytest.raises(InputError, match=message):
        mk.decode_meta_key(raw)
