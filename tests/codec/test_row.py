"""Row values v1/v2, datums and handles: docs/encoding.md#test-vectors vectors and round trips."""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from codec_tables import BIN, ft, make_table

from tidelake.codec import datum as d
from tidelake.codec import keys
from tidelake.codec import mysql_types as mt
from tidelake.codec.common_handle import decode_common_handle, encode_common_handle
from tidelake.codec.json_binary import JSON_NULL
from tidelake.codec.row import decode_row, encode_row, jsonable, row_handle
from tidelake.codec.row_v1 import encode_row_v1, parse_row_v1
from tidelake.codec.row_v2 import FLAG_CHECKSUM, FLAG_LARGE, encode_row_v2, parse_row_v2
from tidelake.codec.row_value import (
    decode_value,
    encode_flat_datum,
    encode_key_datum,
    encode_value,
)
from tidelake.errors import InputError

H = bytes.fromhex

ALL_VALUES = {
    "i8": -128,
    "u16": 65535,
    "i24": -8388608,
    "i32": 2**31 - 1,
    "i64": -(2**63),
    "u64": 2**64 - 1,
    "f32": 1.5,
    "f64": -2.25e100,
    "dec": Decimal("-12345678.90"),
    "dt": date(2024, 1, 2),
    "dtm": datetime(2024, 1, 2, 3, 4, 5, 123456),
    "ts": datetime(2011, 11, 10, 11, 11, 11, 999000, tzinfo=timezone.utc),
    "tm": timedelta(hours=-838, minutes=-59, seconds=-59),
    "yr": 2023,
    "vc": "héllo wörld",
    "ch": "abc",
    "txt": "long text " * 10,
    "vb": b"\x00\xff\x10",
    "bl": bytes(range(256)),
    "en": "b",
    "st": "x,z",
    "bt": 0x1234,
    "js": {"key": [1, "two", None, True, 2.5]},
}


# --- vectors ----------------------------------------------------------------------------


def d14_table():
    return make_table(
        [
            ("id1", ft(mt.TYPE_LONGLONG)),
            ("id2", ft(mt.TYPE_VARCHAR)),
            ("id3", ft(mt.TYPE_LONG)),
            ("id4", ft(mt.TYPE_NEWDECIMAL, flen=6, decimal=2)),
            ("id5", ft(mt.TYPE_DATETIME, decimal=0)),
        ]
    )


D14 = H("80000400010001020405030100040009001100016162630602800c22000000053144b219")


def test_row_v2_vector_d14():
    table = d14_table()
    table.columns[2].default = "0"  # a non-nil default makes TiDB keep the NULL in the null list
    values = {"id1": 1, "id2": "abc", "id3": None, "id4": Decimal("12.34"), "id5": datetime(2024, 1, 2, 3, 4, 5)}
    assert encode_row(table, values) == D14
    assert decode_row(D14, table) == values


@pytest.mark.parametrize(
    ("field_type", "value", "hex_"),
    [  # docs/encoding.md#vectors-derived-from-the-rules D15 data-area forms
        (ft(mt.TYPE_YEAR), 2023, "e707"),
        (ft(mt.TYPE_ENUM, elems=["a", "b"]), "b", "02"),
        (ft(mt.TYPE_SET, elems=["a", "b", "c"]), "a,c", "05"),
        (ft(mt.TYPE_BIT, flen=16), 0x1234, "3412"),
        (ft(mt.TYPE_LONG), -129, "7fff"),
        (ft(mt.TYPE_LONG), 40000, "409c0000"),
        (ft(mt.TYPE_LONGLONG), 2**31, "0000008000000000"),
        (ft(mt.TYPE_LONG, flag=mt.UNSIGNED_FLAG), 256, "0001"),
        (ft(mt.TYPE_DATE), date(2024, 1, 2), "000000000044b219"),
        (ft(mt.TYPE_DURATION, decimal=0), timedelta(seconds=-1), "003665c4"),
        (ft(mt.TYPE_DOUBLE), 1.5, "bff8000000000000"),
        (ft(mt.TYPE_NEWDECIMAL, flen=6, decimal=4), Decimal("11.9900"), "06048b26ac"),  # D12
        (ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=0), Decimal(0), "0a008000000000"),
        (ft(mt.TYPE_NEWDECIMAL, flen=6, decimal=2), Decimal("-12.34"), "06027ff3dd"),
        (ft(mt.TYPE_NEWDECIMAL, flen=14, decimal=4), Decimal("1234567890.1234"), "0e04810dfb38d204d2"),  # docs/encoding.md#literal-bytes-from-upstream-tests #12
        (ft(mt.TYPE_JSON), {"key": "value"}, "01010000001c000000130000000300" + "0c16000000" + "6b6579" + "0576616c7565"),
    ],
)
def test_row_v2_value_forms(field_type, value, hex_):
    assert encode_value(value, field_type).hex() == hex_
    assert decode_value(H(hex_), field_type) == value


def test_packed_time_vectors():
    ts = ft(mt.TYPE_TIMESTAMP, decimal=6)
    value = datetime(2011, 11, 10, 11, 11, 11, 999999, tzinfo=timezone.utc)
    assert encode_value(value, ts) == struct.pack("<Q", 1840446893366133311)  # docs/encoding.md#literal-bytes-from-upstream-tests #13
    dtm = ft(mt.TYPE_DATETIME, decimal=0)
    assert encode_value(datetime(2024, 1, 2, 3, 4, 5), dtm) == struct.pack("<Q", 0x19B2443105000000)  # D13
    tm = ft(mt.TYPE_DURATION, decimal=0)
    assert decode_value(struct.pack("<q", 14400000000000), tm) == timedelta(hours=4)  # docs/encoding.md#literal-bytes-from-upstream-tests #14


def test_zero_datetime_is_one_byte():  # D15
    dtm = ft(mt.TYPE_DATETIME, decimal=0)
    zero = decode_value(b"\x00", dtm)
    assert zero.is_zero and encode_value(zero, dtm) == b"\x00"


def test_empty_rows():  # D16, docs/encoding.md#row-value-format-v1
    table = make_table([("a", ft(mt.TYPE_LONG))])
    assert encode_row_v2({}) == H("800000000000")
    assert decode_row(H("800000000000"), table) == {"a": None}
    assert parse_row_v1(b"\x00") == {}
    with pytest.raises(InputError, match="empty"):
        decode_row(b"", table)


def test_row_v1_vectors():
    long = ft(mt.TYPE_LONGLONG)
    d17 = H("080208020804080408060806080800")  # D17
    assert encode_row_v1([(i, encode_flat_datum(v, long)) for i, v in zip([1, 2, 3, 4], [1, 2, 3, None])]) == d17
    table = make_table([(n, long) for n in "abcd"])
    assert decode_row(d17, table) == {"a": 1, "b": 2, "c": 3, "d": None}
    d18 = H("080208c801080402066162630806060100" + "81")  # D18: DECIMAL without a length
    table = make_table([("n", long), ("s", ft(mt.TYPE_VARCHAR)), ("x", ft(mt.TYPE_NEWDECIMAL))])
    values = {"n": 100, "s": "abc", "x": Decimal(1)}
    assert encode_row_v1([(c.id, encode_flat_datum(values[c.name], c.field_type)) for c in table.columns]) == d18
    assert decode_row(d18, table) == values


def test_row_v1_round_trip_all_types(all_types_table):
    table = all_types_table
    v1 = encode_row_v1([(c.id, encode_flat_datum(ALL_VALUES[c.name], c.field_type)) for c in table.columns])
    assert decode_row(v1, table, 7) == {**ALL_VALUES, "_tidb_rowid": 7}


# --- round trips --------------------------------------------------------------------------


def test_round_trip_every_type_small(all_types_table):
    value = encode_row(all_types_table, ALL_VALUES)
    assert value[1] & FLAG_LARGE == 0
    assert decode_row(value, all_types_table, 7) == {**ALL_VALUES, "_tidb_rowid": 7}


def test_round_trip_large_by_data_size(all_types_table):
    values = {**ALL_VALUES, "bl": b"\xab" * 70000}
    value = encode_row(all_types_table, values)
    assert value[1] & FLAG_LARGE
    assert decode_row(value, all_types_table, 1) == {**values, "_tidb_rowid": 1}


def test_round_trip_large_by_column_id(all_types_table):
    table = all_types_table
    table.columns[-1].id = 300
    value = encode_row(table, ALL_VALUES)
    assert value[1] & FLAG_LARGE
    assert struct.unpack_from("<I", value, 6)[0] == 1  # 32-bit ids
    assert decode_row(value, table) == ALL_VALUES


def test_nulls_listed_or_skipped(all_types_table):
    table = all_types_table
    table.columns[0].default = "5"
    value = encode_row(table, {})
    row = parse_row_v2(value)
    assert row.null_ids == {1} and not row.spans  # only the column with a default keeps its NULL
    assert decode_row(value, table) == {name: None for name in ALL_VALUES}


def test_float32_column_is_narrowed(all_types_table):
    value = encode_row(all_types_table, {"f32": 0.1})
    assert decode_row(value, all_types_table)["f32"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]


def test_json_null_document_differs_from_sql_null():
    table = make_table([("js", ft(mt.TYPE_JSON))])
    table.columns[0].default = "null"
    assert decode_row(encode_row(table, {"js": JSON_NULL}), table)["js"] is JSON_NULL
    assert decode_row(encode_row(table, {"js": None}), table)["js"] is None


def test_missing_columns_take_origin_default_then_null_then_zero():
    table = make_table(
        [
            ("a", ft(mt.TYPE_LONG)),
            ("b", ft(mt.TYPE_VARCHAR, flag=mt.NOT_NULL_FLAG)),
            ("c", ft(mt.TYPE_DATETIME, decimal=0)),
            ("d", ft(mt.TYPE_LONG, flag=mt.NOT_NULL_FLAG)),
            ("e", ft(mt.TYPE_ENUM, flag=mt.NOT_NULL_FLAG, elems=["p", "q"])),
            ("f", ft(mt.TYPE_BIT, flen=8)),
            ("g", ft(mt.TYPE_NEWDECIMAL, flag=mt.NOT_NULL_FLAG, flen=5, decimal=2)),
        ]
    )
    old_row = encode_row(make_table([("a", ft(mt.TYPE_LONG))]), {"a": 1})  # written before ADD COLUMNs
    table.columns[1].origin_default = "dflt"
    table.columns[2].origin_default = "2020-02-03 04:05:06"
    table.columns[5].origin_default_bit = b"\x05"
    assert decode_row(old_row, table) == {
        "a": 1,
        "b": "dflt",
        "c": datetime(2020, 2, 3, 4, 5, 6),
        "d": 0,
        "e": "p",
        "f": 5,
        "g": Decimal("0.00"),
    }


def test_pk_is_handle_column_comes_from_key():
    table = make_table([("id", ft(mt.TYPE_LONG, flag=mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG)), ("v", ft(mt.TYPE_VARCHAR))], pk_is_handle=True)
    values = {"id": -7, "v": "x"}
    value = encode_row(table, values)
    assert parse_row_v2(value).spans.keys() == {2}  # the handle column is not in the value
    handle = row_handle(table, values)
    assert keys.record_key(100, handle) == H("7480000000000000645f727ffffffffffffff9")
    assert decode_row(value, table, keys.decode_record_key(keys.record_key(100, handle))[1]) == values
    assert decode_row(value, table) == {"v": "x"}  # without the key, the PK is unknown


def test_unsigned_bigint_handle_above_max_int64():  # D20
    flag = mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG | mt.UNSIGNED_FLAG
    table = make_table([("id", ft(mt.TYPE_LONGLONG, flag=flag)), ("v", ft(mt.TYPE_LONG))], pk_is_handle=True)
    values = {"id": 2**63 + 5, "v": 1}
    key = keys.record_key(100, row_handle(table, values))
    assert key[11:] == H("0000000000000005")
    assert decode_row(encode_row(table, values), table, keys.decode_record_key(key)[1]) == values


def common_table(**kw):
    return make_table(
        [
            ("name", ft(mt.TYPE_VARCHAR, flen=32, **BIN)),
            ("k", ft(mt.TYPE_LONG, flag=mt.NOT_NULL_FLAG | mt.PRI_KEY_FLAG)),
            ("v", ft(mt.TYPE_DOUBLE)),
            ("s", ft(mt.TYPE_VARCHAR, flen=32, flag=mt.NOT_NULL_FLAG | mt.PRI_KEY_FLAG)),
        ],
        is_common_handle=True,
        **kw,
    )


def test_common_handle_key_vector():  # D8
    table = common_table(primary=["name", "k"])
    handle = encode_common_handle(table, {"name": b"abc", "k": 5})
    assert keys.record_key(100, handle) == H("7480000000000000645f72016162630000000000fa038000000000000005")
    assert decode_common_handle(table, handle) == {"name": b"abc", "k": 5}


def test_common_handle_composite_pk_round_trip():
    table = common_table(primary=["s", "k", ("name", 2)])
    values = {"name": b"abcdef", "k": 9, "v": 0.5, "s": "zz "}
    value = encode_row(table, values)
    stored = parse_row_v2(value).spans.keys()
    # k is restorable from the key; name is a prefix column; s (VARCHAR _bin) needs restored data
    assert stored == {1, 3, 4}
    assert encode_row(table, values, new_collation=False) != value  # s is then rebuilt from the key
    assert parse_row_v2(encode_row(table, values, new_collation=False)).spans.keys() == {1, 3}
    handle = row_handle(table, values)
    assert handle.startswith(encode_key_datum("zz", table.columns[3].field_type))  # sort key trims spaces
    assert decode_row(value, table, handle) == values


def test_short_common_handle_is_padded_and_decoded():
    table = make_table([("p", ft(mt.TYPE_NEWDECIMAL, flen=2, decimal=0)), ("v", ft(mt.TYPE_LONG))], is_common_handle=True, primary=["p"])
    handle = row_handle(table, {"p": Decimal(7), "v": 1})
    assert len(handle) == 9 and handle.endswith(b"\x00\x00\x00\x00")
    assert decode_row(encode_row(table, {"p": Decimal(7), "v": 1}), table, handle) == {"p": Decimal(7), "v": 1}


def test_checksum_trailer_is_ignored():
    table = d14_table()
    table.columns[2].default = "0"
    with_checksum = bytes([D14[0], D14[1] | FLAG_CHECKSUM]) + D14[2:] + H("01deadbeef")
    assert decode_row(with_checksum, table) == decode_row(D14, table)


def test_virtual_generated_columns_are_not_written():
    table = make_table([("a", ft(mt.TYPE_LONG)), ("b", ft(mt.TYPE_LONG))])
    table.columns[1].generated_expr_string = "`a` + 1"
    value = encode_row(table, {"a": 1, "b": 2})
    assert parse_row_v2(value).spans.keys() == {1}
    assert decode_row(value, table) == {"a": 1}


# --- datums and index keys -----------------------------------------------------------------


def test_index_key_vectors():
    vc = ft(mt.TYPE_VARCHAR)
    values = b"".join(encode_key_datum(v, vc) for v in ("RW01", "768221109", ""))
    key9 = keys.index_key(411, 1, values)  # docs/encoding.md#literal-bytes-from-upstream-tests #9
    assert key9 == H(
        "74800000000000019b5f698000000000000001015257303100000000fb01373638323231"
        "3130ff3900000000000000f8010000000000000000f7"
    )
    key10 = keys.index_key(12937, 1, encode_key_datum("C19092900000048625523", vc))  # docs/encoding.md#literal-bytes-from-upstream-tests #10
    assert key10 == H("7480000000000032895f698000000000000001014331393039323930ff3030303030343836ff3235353233000000fc")
    table_id, index_id, rest = keys.decode_index_key(key9)
    assert (table_id, index_id) == (411, 1)
    assert [x.value for x in d.decode_datums(rest)] == [b"RW01", b"768221109", b""]


def test_index_key_handles():
    long = ft(mt.TYPE_LONG)
    d9 = keys.index_key(100, 2, encode_key_datum(7, long) + encode_key_datum(42, long))
    assert d9 == H("74 80 00 00 00 00 00 00 64 5f 69 80 00 00 00 00 00 00 02 03 80 00 00 00 00 00 00 07 03 80 00 00 00 00 00 00 2a")
    values, handle = keys.split_index_key_values(keys.decode_index_key(d9)[2], 1)
    assert values == [d.Datum(d.INT_FLAG, 7)] and handle == 42
    d10 = keys.index_key(100, 3, encode_key_datum("x", ft(mt.TYPE_VARCHAR)))
    assert d10 == H("74 80 00 00 00 00 00 00 64 5f 69 80 00 00 00 00 00 00 03 01 78 00 00 00 00 00 00 00 f8")
    assert keys.split_index_key_values(keys.decode_index_key(d10)[2], 1)[1] is None
    assert keys.index_value_handle(H("000000000000002a")) == 42  # D10 value
    assert keys.index_value_handle(H("000000000000000131")) == 1  # docs/encoding.md#literal-bytes-from-upstream-tests #11 untouched
    assert keys.index_value_handle(b"0") is None


@pytest.mark.parametrize(
    ("field_type", "value"),
    [
        (ft(mt.TYPE_LONG), -5),
        (ft(mt.TYPE_LONGLONG, flag=mt.UNSIGNED_FLAG), 2**64 - 1),
        (ft(mt.TYPE_DOUBLE), -0.25),
        (ft(mt.TYPE_NEWDECIMAL, flen=8, decimal=3), Decimal("-1.500")),
        (ft(mt.TYPE_DATETIME, decimal=2), datetime(2020, 1, 1, 0, 0, 0, 120000)),
        (ft(mt.TYPE_DURATION, decimal=0), timedelta(hours=-3)),
        (ft(mt.TYPE_ENUM, elems=["a", "b"]), "a"),
        (ft(mt.TYPE_SET, elems=["a", "b"]), "a,b"),
        (ft(mt.TYPE_BIT, flen=3), 5),
        (ft(mt.TYPE_VARCHAR, **BIN), b"\x00\x01"),
        (ft(mt.TYPE_YEAR), 1999),
    ],
)
def test_key_datum_round_trip(field_type, value):
    from tidelake.codec.row_value import value_from_datum

    encoded = encode_key_datum(value, field_type)
    datum, end = d.decode_datum(encoded)
    assert end == len(encoded) and value_from_datum(datum, field_type) == value


def test_key_datum_order_matches_value_order():
    long = ft(mt.TYPE_LONG)
    assert encode_key_datum(-1, long) < encode_key_datum(0, long) < encode_key_datum(1, long)
    assert encode_key_datum(None, long) < encode_key_datum(-(2**63), long)


# --- bad input -----------------------------------------------------------------------------


def test_truncated_row_names_offset_and_column():
    value = encode_row(make_table([("a", ft(mt.TYPE_LONGLONG)), ("b", ft(mt.TYPE_DOUBLE))]), {"a": 2**40, "b": 1.0})
    with pytest.raises(InputError, match=r"row value truncated at byte 20: column 2 needs 8 bytes, 5 left"):
        parse_row_v2(value[:-3])
    with pytest.raises(InputError, match="truncated at byte 6"):
        parse_row_v2(value[:7])


def test_wrong_width_value_names_column():
    table = make_table([("a", ft(mt.TYPE_LONGLONG)), ("b", ft(mt.TYPE_DOUBLE))])
    value = encode_row_v2({1: b"\x01", 2: b"\x00\x00\x00"})
    with pytest.raises(InputError, match=r"column 'b' \(id 2\) value at byte 13: double value has 3 bytes"):
        decode_row(value, table)


def test_unknown_type_code_is_input_error():
    table = make_table([("g", ft(mt.TYPE_GEOMETRY))])
    with pytest.raises(InputError, match="unsupported column type code 255"):
        decode_row(encode_row_v2({1: b"\x01"}), table)


def test_bad_v1_datum():
    with pytest.raises(InputError, match="unknown datum flag 0x63 at byte 2"):
        parse_row_v1(H("080263"))


# --- jsonable ------------------------------------------------------------------------------


def test_jsonable_forms(all_types_table):
    types = {c.name: c.field_type for c in all_types_table.columns}
    out = {k: jsonable(v, types[k]) for k, v in ALL_VALUES.items()}
    assert out["dec"] == "-12345678.90"
    assert out["dtm"] == "2024-01-02T03:04:05.123456"
    assert out["ts"] == "2011-11-10T11:11:11.999000+00:00"
    assert out["dt"] == "2024-01-02"
    assert out["tm"] == "-838:59:59"
    assert out["vb"] == "AP8Q"
    assert out["u64"] == 2**64 - 1 and out["bt"] == 0x1234 and out["st"] == "x,z"
    assert out["js"] == {"key": [1, "two", None, True, 2.5]}
    assert jsonable(float("nan"), types["f64"]) == "nan"
    assert jsonable(JSON_NULL, types["js"]) is None


def test_float_column_holding_a_double_beyond_float32_decodes_as_go_does():
    """rowcodec decodes FLOAT with Go's float32(f64): out of float32 range is ±Inf, never a crash;
    writing such a value is an input error (MySQL: out of range for FLOAT)."""
    float_ft = ft(mt.TYPE_FLOAT)
    assert decode_value(d.encode_float(1e300), float_ft) == float("inf")
    assert decode_value(d.encode_float(-1e300), float_ft) == float("-inf")
    assert decode_value(d.encode_float(3.4028235e38), float_ft) == struct.unpack("<f", struct.pack("<f", 3.4028235e38))[0]
    with pytest.raises(InputError, match="FLOAT"):
        encode_value(1e300, float_ft)
