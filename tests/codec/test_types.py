"""MySQL type codes/flags (docs/encoding.md#mysql-type-codes-and-column-flags) and the MySQL -> Spark mapping (docs/design.md#lake-layout)."""

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from tidelake.codec import mysql_types as mt
from tidelake.codec.json_binary import JSON_NULL
from tidelake.codec.mytime import MySQLTime
from tidelake.codec.schema import FieldType
from tidelake.codec.spark_types import (
    TYPE_MAPPING,
    spark_type,
    spark_value,
    type_mapping_markdown,
)
from tidelake.errors import InputError

UNSIGNED = mt.UNSIGNED_FLAG


def test_type_codes_match_facts_table() -> None:
    codes = {
        0: "TYPE_UNSPECIFIED", 1: "TYPE_TINY", 2: "TYPE_SHORT", 3: "TYPE_LONG", 4: "TYPE_FLOAT", 5: "TYPE_DOUBLE",
        6: "TYPE_NULL", 7: "TYPE_TIMESTAMP", 8: "TYPE_LONGLONG", 9: "TYPE_INT24", 10: "TYPE_DATE", 11: "TYPE_DURATION",
        12: "TYPE_DATETIME", 13: "TYPE_YEAR", 14: "TYPE_NEWDATE", 15: "TYPE_VARCHAR", 16: "TYPE_BIT",
        0xE1: "TYPE_TIDB_VECTOR_FLOAT32", 0xF5: "TYPE_JSON", 0xF6: "TYPE_NEWDECIMAL", 0xF7: "TYPE_ENUM", 0xF8: "TYPE_SET",
        0xF9: "TYPE_TINY_BLOB", 0xFA: "TYPE_MEDIUM_BLOB", 0xFB: "TYPE_LONG_BLOB", 0xFC: "TYPE_BLOB",
        0xFD: "TYPE_VAR_STRING", 0xFE: "TYPE_STRING", 0xFF: "TYPE_GEOMETRY",
    }
    for code, name in codes.items():
        assert getattr(mt, name) == code
    assert set(mt.TYPE_NAMES) == set(codes)


def test_flags_match_facts_table() -> None:
    flags = [mt.NOT_NULL_FLAG, mt.PRI_KEY_FLAG, mt.UNIQUE_KEY_FLAG, mt.MULTIPLE_KEY_FLAG, mt.BLOB_FLAG, mt.UNSIGNED_FLAG,
             mt.ZEROFILL_FLAG, mt.BINARY_FLAG, mt.ENUM_FLAG, mt.AUTO_INCREMENT_FLAG, mt.TIMESTAMP_FLAG, mt.SET_FLAG,
             mt.NO_DEFAULT_VALUE_FLAG, mt.ON_UPDATE_NOW_FLAG, mt.PART_KEY_FLAG, mt.NUM_FLAG]
    assert flags == [1 << i for i in range(16)]
    assert mt.GENERATED_COLUMN_FLAG == 1 << 23
    # docs/encoding.md#mysql-type-codes-and-column-flags: `id INT AUTO_INCREMENT PRIMARY KEY` has Flag 515
    assert mt.AUTO_INCREMENT_FLAG | mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG == 515
    assert mt.is_unsigned(4131) and not mt.is_unsigned(515)


def test_binary_strings() -> None:
    assert mt.is_binary_string(FieldType(mt.TYPE_STRING, 128, 16, 0, "binary", "binary"))
    assert mt.is_binary_string(FieldType(mt.TYPE_BLOB, 144, 65535, 0, "binary", "binary"))
    assert not mt.is_binary_string(FieldType(mt.TYPE_VARCHAR, 0, 10, 0, "utf8mb4", "utf8mb4_bin"))
    assert not mt.is_binary_string(FieldType(mt.TYPE_LONG, 128, 11, 0, "binary", "binary"))  # numbers carry charset binary too


TEXT = ("utf8mb4", "utf8mb4_bin")
BIN = ("binary", "binary")


@pytest.mark.parametrize(
    ("ft", "expected"),
    [
        (FieldType(mt.TYPE_TINY, 0, 4, 0, *BIN), "TINYINT"),
        (FieldType(mt.TYPE_TINY, UNSIGNED, 3, 0, *BIN), "SMALLINT"),
        (FieldType(mt.TYPE_SHORT, 0, 6, 0, *BIN), "SMALLINT"),
        (FieldType(mt.TYPE_SHORT, UNSIGNED, 5, 0, *BIN), "INT"),
        (FieldType(mt.TYPE_INT24, UNSIGNED, 8, 0, *BIN), "INT"),
        (FieldType(mt.TYPE_LONG, 0, 11, 0, *BIN), "INT"),
        (FieldType(mt.TYPE_LONG, UNSIGNED, 10, 0, *BIN), "BIGINT"),
        (FieldType(mt.TYPE_LONGLONG, 0, 20, 0, *BIN), "BIGINT"),
        (FieldType(mt.TYPE_LONGLONG, UNSIGNED, 20, 0, *BIN), "DECIMAL(20,0)"),
        (FieldType(mt.TYPE_FLOAT, 0, 12, -1, *BIN), "FLOAT"),
        (FieldType(mt.TYPE_DOUBLE, 0, 22, -1, *BIN), "DOUBLE"),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 38, 10, *BIN), "DECIMAL(38,10)"),
        (FieldType(mt.TYPE_NEWDECIMAL, UNSIGNED, 10, 0, *BIN), "DECIMAL(10,0)"),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 39, 2, *BIN), "STRING"),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 65, 30, *BIN), "STRING"),
        (FieldType(mt.TYPE_BIT, UNSIGNED, 1, 0, *BIN), "BIGINT"),
        (FieldType(mt.TYPE_BIT, UNSIGNED, 63, 0, *BIN), "BIGINT"),
        (FieldType(mt.TYPE_BIT, UNSIGNED, 64, 0, *BIN), "DECIMAL(20,0)"),
        (FieldType(mt.TYPE_YEAR, UNSIGNED | mt.ZEROFILL_FLAG, 4, 0, *BIN), "SMALLINT"),
        (FieldType(mt.TYPE_DATE, 128, 10, 0, *BIN), "DATE"),
        (FieldType(mt.TYPE_DATETIME, 128, 26, 6, *BIN), "TIMESTAMP_NTZ"),
        (FieldType(mt.TYPE_TIMESTAMP, 128, 23, 3, *BIN), "TIMESTAMP"),
        (FieldType(mt.TYPE_DURATION, 128, 10, 0, *BIN), "BIGINT"),
        (FieldType(mt.TYPE_VARCHAR, 0, 255, 0, *TEXT), "STRING"),
        (FieldType(mt.TYPE_STRING, 0, 10, 0, *TEXT), "STRING"),
        (FieldType(mt.TYPE_BLOB, 16, 65535, 0, *TEXT), "STRING"),
        (FieldType(mt.TYPE_VARCHAR, 128, 255, 0, *BIN), "BINARY"),
        (FieldType(mt.TYPE_LONG_BLOB, 144, 4294967295, 0, *BIN), "BINARY"),
        (FieldType(mt.TYPE_ENUM, 0, 1, 0, *TEXT, ["a", "b"]), "STRING"),
        (FieldType(mt.TYPE_SET, 0, 3, 0, *TEXT, ["a", "b"]), "STRING"),
        (FieldType(mt.TYPE_JSON, 128, 4294967295, 0, *BIN), "STRING"),
        (FieldType(mt.TYPE_TIDB_VECTOR_FLOAT32, 0, 3, 0, *BIN), "ARRAY<FLOAT>"),
    ],
)
def test_spark_type(ft: FieldType, expected: str) -> None:
    assert spark_type(ft) == expected


def test_unmappable_type_is_an_input_error() -> None:
    with pytest.raises(InputError, match="type code 6"):
        spark_type(FieldType(mt.TYPE_NULL))


def test_markdown_renders_every_row() -> None:
    text = type_mapping_markdown()
    lines = text.strip().splitlines()
    assert len(lines) == 2 + len(TYPE_MAPPING)
    assert "| BIGINT | UNSIGNED | DECIMAL(20,0) |" in text
    assert "| DATETIME(fsp) |  | TIMESTAMP_NTZ |" in text


UTC = timezone.utc


@pytest.mark.parametrize(
    ("ft", "value", "expected"),
    [
        (FieldType(mt.TYPE_LONGLONG, UNSIGNED, 20, 0), 2**64 - 1, Decimal(2**64 - 1)),
        (FieldType(mt.TYPE_BIT, UNSIGNED, 64, 0), 2**63, Decimal(2**63)),
        (FieldType(mt.TYPE_BIT, UNSIGNED, 8, 0), 0xA5, 0xA5),
        (FieldType(mt.TYPE_LONG, 0, 11, 0), -5, -5),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 10, 2), Decimal("12.3"), Decimal("12.30")),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 10, 2), Decimal("12.345"), Decimal("12.35")),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 65, 30), Decimal("-1E-30"), "-0.000000000000000000000000000001"),
        (FieldType(mt.TYPE_DURATION, 0, 10, 6), timedelta(hours=-838, microseconds=-1), -(838 * 3600 * 10**6 + 1)),
        (FieldType(mt.TYPE_DATE, 0, 10, 0), date(2024, 2, 29), date(2024, 2, 29)),
        (FieldType(mt.TYPE_DATE, 0, 10, 0), MySQLTime(0, 0, 0, tp=mt.TYPE_DATE), None),
        (FieldType(mt.TYPE_DATETIME, 0, 19, 0), datetime(2024, 1, 2, 3, 4, 5), datetime(2024, 1, 2, 3, 4, 5)),
        (FieldType(mt.TYPE_DATETIME, 0, 19, 0), MySQLTime(0, 0, 0), None),
        (FieldType(mt.TYPE_TIMESTAMP, 0, 19, 0), datetime(2024, 1, 2, 3, tzinfo=UTC), datetime(2024, 1, 2, 3, tzinfo=UTC)),
        (FieldType(mt.TYPE_JSON), {"b": [1, None], "a": True}, '{"a": true, "b": [1, null]}'),
        (FieldType(mt.TYPE_JSON), JSON_NULL, "null"),
        (FieldType(mt.TYPE_VARCHAR, 0, 10, 0, *BIN), b"\x00\xff", b"\x00\xff"),
        (FieldType(mt.TYPE_VARCHAR, 0, 10, 0, *TEXT), "héllo", "héllo"),
        (FieldType(mt.TYPE_ENUM, 0, 1, 0, *TEXT, ["a"]), "a", "a"),
        (FieldType(mt.TYPE_TIDB_VECTOR_FLOAT32), [1.5, 2.0], [1.5, 2.0]),
        (FieldType(mt.TYPE_FLOAT), 1.25, 1.25),
        (FieldType(mt.TYPE_YEAR), 2155, 2155),
        (FieldType(mt.TYPE_LONG), None, None),
    ],
)
def test_spark_value(ft: FieldType, value: object, expected: object) -> None:
    assert spark_value(value, ft) == expected


def test_spark_value_rejects_mismatched_values() -> None:
    with pytest.raises(InputError):
        spark_value("12", FieldType(mt.TYPE_LONG))
    with pytest.raises(InputError):
        spark_value(b"x", FieldType(mt.TYPE_VARCHAR, 0, 10, 0, *TEXT))
    with pytest.raises(InputError, match="no timezone"):
        spark_value(datetime(2024, 1, 1), FieldType(mt.TYPE_TIMESTAMP))
    with pytest.raises(InputError, match="does not fit"):
        spark_value(Decimal("1000"), FieldType(mt.TYPE_NEWDECIMAL, 0, 5, 2))
    with pytest.raises(InputError, match="DATE column"):
        spark_value(datetime(2024, 1, 1), FieldType(mt.TYPE_DATE))


@pytest.mark.spark
def test_spark_accepts_every_mapped_type_and_value(spark) -> None:
    from pyspark.sql import Row

    cases = [
        (FieldType(mt.TYPE_LONGLONG, UNSIGNED, 20, 0), 2**64 - 1),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 65, 30), Decimal("123.000000000000000000000000000001")),
        (FieldType(mt.TYPE_NEWDECIMAL, 0, 12, 4), Decimal("-1.5")),
        (FieldType(mt.TYPE_TINY, UNSIGNED, 3, 0), 255),
        (FieldType(mt.TYPE_TIMESTAMP, 0, 26, 6), datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
        (FieldType(mt.TYPE_DATETIME, 0, 26, 6), datetime(2024, 1, 2, 3, 4, 5, 6)),
        (FieldType(mt.TYPE_DATE), date(2024, 2, 29)),
        (FieldType(mt.TYPE_DURATION, 0, 10, 0), timedelta(hours=-1)),
        (FieldType(mt.TYPE_BLOB, 0, 10, 0, *BIN), b"\x00\x01"),
        (FieldType(mt.TYPE_JSON), {"a": [1]}),
        (FieldType(mt.TYPE_TIDB_VECTOR_FLOAT32), [0.5, 1.0]),
    ]
    schema = ", ".join(f"c{i} {spark_type(ft)}" for i, (ft, _) in enumerate(cases))
    row = tuple(spark_value(v, ft) for ft, v in cases)
    df = spark.createDataFrame([row], schema)
    got: Row = df.collect()[0]
    assert got[0] == Decimal(2**64 - 1)
    assert got[1] == "123.000000000000000000000000000001"
    assert got[2] == Decimal("-1.5000") and got[3] == 255
    assert got[6] == date(2024, 2, 29) and got[7] == -3600 * 10**6
    assert got[5] == datetime(2024, 1, 2, 3, 4, 5, 6)
    assert bytes(got[8]) == b"\x00\x01" and got[9] == '{"a": [1]}' and got[10] == [0.5, 1.0]
