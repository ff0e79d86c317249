"""Record/index keys and spans against docs/encoding.md#test-vectors and docs/wire.md#key-encodings."""

import pytest

from tidelake.codec import keys
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.codec.number import encode_uint_desc
from tidelake.errors import InputError

H = bytes.fromhex


def test_int_handle_record_keys():
    assert keys.record_key(1, 2) == H("7480000000000000015f728000000000000002")  # D2
    assert keys.record_key(100, -5) == H("7480000000000000645f727ffffffffffffffb")  # D3
    assert keys.decode_record_key(keys.record_key(100, -5)) == (100, -5)
    for handle in (-(2**63), 0, 2**63 - 1):
        assert keys.decode_record_key(keys.record_key(7, handle)) == (7, handle)


def test_unsigned_handle_uses_int64_bit_pattern():  # D20
    handle = 2**63 + 5 - 2**64
    assert keys.record_key(1, handle)[11:] == H("0000000000000005")


def test_record_spans_raw_and_encoded():
    assert keys.table_record_span(1) == (H("7480000000000000015f72"), H("7480000000000000015f73"))  # D4
    assert keys.table_record_span_encoded(1) == (  # D5
        H("7480000000000000ff015f720000000000fa"),
        H("7480000000000000ff015f730000000000fa"),
    )
    assert keys.table_split_key(1) == H("7480000000000000ff0100000000000000f8")  # D6
    encoded_row = H("7480000000000000ff015f728000000000ff0000020000000000fa")  # D7
    assert keys.to_region_key(keys.record_key(1, 2)) == encoded_row
    assert keys.from_region_key(encoded_row) == keys.record_key(1, 2)
    assert keys.from_region_key(b"") == b""
    start, end = keys.table_record_span_encoded(1)
    assert start <= encoded_row < end


def test_mvcc_key_vector():  # D19
    ts = 400000000000000000
    mvcc = keys.to_region_key(keys.record_key(1, 2)) + encode_uint_desc(ts)
    assert mvcc.hex().endswith("fa72ea1e89d7ffff")


def test_ddl_job_table_span():  # docs/wire.md#key-encodings worked values
    assert keys.DDL_JOB_TABLE_ID == 281474976710654
    assert keys.table_prefix(keys.DDL_JOB_TABLE_ID) == H("748000fffffffffffe")
    assert keys.table_record_span(keys.DDL_JOB_TABLE_ID) == (H("748000fffffffffffe5f72"), H("748000fffffffffffe5f73"))
    assert keys.table_record_span_encoded(keys.DDL_JOB_TABLE_ID) == (
        H("748000fffffffffffffe5f720000000000fa"),
        H("748000fffffffffffffe5f730000000000fa"),
    )
    assert keys.record_key(keys.DDL_JOB_TABLE_ID, 1) == H("748000fffffffffffe5f728000000000000001")
    assert encode_bytes(b"m") == H("6d00000000000000f8")


def test_table_id_and_kind_of_keys():
    row = keys.record_key(42, 1)
    idx = keys.index_key(42, 666, b"")
    assert keys.table_id_of(row) == keys.table_id_of(idx) == 42
    assert keys.is_record_key(row) and not keys.is_index_key(row)
    assert keys.is_index_key(idx + b"\x00") and not keys.is_record_key(idx)
    assert idx[11:19] == H("800000000000029a")
    assert keys.decode_index_key(idx + b"\x03") == (42, 666, b"\x03")


def test_common_handle_key_is_padded_and_kept():
    row = keys.record_key(5, b"\x06\x02\x01\x80")
    assert row[11:] == H("060201800000000000")
    assert keys.decode_record_key(row) == (5, row[11:])


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (H("6d00"), "not a record key"),
        (H("7480000000000000015f72800000"), "neither an 8-byte int handle"),
    ],
)
def test_bad_record_keys(key, message):
    with pytest.raises(InputError, match=message):
        keys.decode_record_key(key)


def test_bad_region_key():
    with pytest.raises(InputError, match="trailing"):
        keys.from_region_key(encode_bytes(b"t") + b"\x01")
    with pytest.raises(InputError):
        keys.table_id_of(b"m")
