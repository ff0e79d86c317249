"""Mounting in Spark equals the codec on the same bytes: every mapped type, every handle kind.

The oracle is tidelake.codec.row.decode_row + spark_value applied to the very bytes that
encode_row produced, row by row in Python; mount must give the same values through
mapInArrow (Arrow batches, cached decoders). One Spark action for the all-types table; the
handle cases run the same batch decoder directly on Arrow batches.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pyarrow as pa
import pytest

from tidelake.codec.keys import record_key
from tidelake.codec.row import decode_row, encode_row, row_handle
from tidelake.codec.schema import IndexColumn, IndexInfo, TableInfo
from tidelake.codec.spark_types import spark_value
from tidelake.lake.row_change import OP_DELETE, OP_PUT
from tidelake.merge.mount import MOUNT_INPUT_COLUMNS, RowMounter, mount, mount_schema
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN, ROWID_COLUMN, replica_struct
from tidelake.merge.window_spec import OP_COLUMN, match_columns
from tidelake.sim.tidb.types import build_column, column_def

TYPES = [
    ("i8", "tinyint"), ("u16", "smallint unsigned"), ("i24", "mediumint"), ("i32", "int"), ("i64", "bigint"),
    ("u64", "bigint unsigned"), ("f32", "float"), ("f64", "double"), ("dec", "decimal(10,2)"),
    ("wide", "decimal(60,10)"), ("dt", "date"), ("dtm", "datetime(6)"), ("ts", "timestamp(3)"), ("tm", "time"),
    ("yr", "year"), ("vc", "varchar(64)"), ("ch", "char(8)"), ("txt", "text"), ("vb", "varbinary(16)"),
    ("bl", "blob"), ("en", "enum('a','b','c')"), ("st", "set('x','y','z')"), ("bt", "bit(16)"), ("js", "json"),
]  # fmt: skip
VALUES = [
    {
        "i8": -128, "u16": 65535, "i24": -8388608, "i32": 2**31 - 1, "i64": -(2**63), "u64": 2**64 - 1,
        "f32": 1.5, "f64": -2.25e100, "dec": Decimal("-12345678.90"),
        "wide": Decimal("12345678901234567890123456789012345678901234567890.0123456789"),
        "dt": date(2024, 2, 29), "dtm": datetime(2024, 1, 2, 3, 4, 5, 123456),
        "ts": datetime(2011, 11, 10, 11, 11, 11, 999000, tzinfo=timezone.utc),
        "tm": timedelta(hours=-838, minutes=-59, seconds=-59), "yr": 2023, "vc": "héllo wörld", "ch": "abc",
        "txt": "long text " * 10, "vb": b"\x00\xff\x10", "bl": bytes(range(256)), "en": "b", "st": "x,z",
        "bt": 0x1234, "js": {"key": [1, "two", None, True, 2.5]},
    },
    {"i8": 1, "vc": "", "dec": Decimal("0.01"), "dt": date(1970, 1, 1), "js": None},  # NULLs elsewhere
]  # fmt: skip


def make_info(columns: list[tuple], table_id: int = 500, **kw) -> TableInfo:
    cols = [build_column(column_def(c), i + 1, i) for i, c in enumerate(columns)]
    return TableInfo(table_id, "t", columns=cols, max_col_id=len(cols), **kw)


def changes_batch(rows: list[tuple]) -> pa.RecordBatch:
    names = list(MOUNT_INPUT_COLUMNS)
    types = [pa.int64(), pa.int64(), pa.string(), pa.binary(), pa.binary(), pa.binary()]
    return pa.RecordBatch.from_arrays([pa.array(col, t) for col, t in zip(zip(*rows), types)], names=names)


def expected_put(info: TableInfo, key_handle, value: bytes, commit_ts: int) -> dict:
    values = decode_row(value, info, key_handle)
    row = {c.name: spark_value(values.get(c.name), c.field_type) for c in info.public_columns()}
    row[COMMIT_TS_COLUMN] = commit_ts
    if ROWID_COLUMN in values:
        row[ROWID_COLUMN] = values[ROWID_COLUMN]
    return row


def run_decoder(info: TableInfo, rows: list[tuple], match: bool = False) -> list[dict]:
    import json

    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(mount_schema(replica_struct(info), info if match else None), timezone="UTC")
    out = RowMounter(json.dumps(info.to_json()), schema)(iter([changes_batch(rows)]))
    return [r for batch in out for r in batch.to_pylist()]


@pytest.mark.spark
def test_mount_in_spark_equals_the_codec_for_every_type(spark):
    info = make_info(TYPES)
    rows, expected = [], []
    for i, values in enumerate(VALUES, start=1):
        value = encode_row(info, values)
        rows.append((info.id, 1000 + i, OP_PUT, record_key(info.id, i), value, b""))
        expected.append({**expected_put(info, i, value, 1000 + i), OP_COLUMN: OP_PUT})
    rows.append((info.id, 1003, OP_DELETE, record_key(info.id, 7), b"", b""))
    df = spark.createDataFrame(rows, "table_id BIGINT, commit_ts BIGINT, op STRING, key BINARY, value BINARY, "
                                     "old_value BINARY")
    got = sorted(mount(df, info, replica_struct(info)).toArrow().to_pylist(), key=lambda r: r[COMMIT_TS_COLUMN])
    assert got[:2] == expected
    assert {k: v for k, v in got[2].items() if v is not None} == {
        ROWID_COLUMN: 7, COMMIT_TS_COLUMN: 1003, OP_COLUMN: OP_DELETE}


@pytest.mark.spark  # replica_struct parses Spark DDL types in the JVM; no Spark job runs
def test_unsigned_pk_handle_above_int64_for_puts_and_key_only_deletes(spark):
    info = make_info([("id", "bigint unsigned", "pk"), ("v", "int")], pk_is_handle=True)
    row = {"id": 2**64 - 2, "v": 5}
    key = record_key(info.id, row_handle(info, row))
    value = encode_row(info, row)
    got = run_decoder(info, [(info.id, 10, OP_PUT, key, value, b""), (info.id, 11, OP_DELETE, key, b"", value)])
    assert got[0] == {**expected_put(info, row_handle(info, row), value, 10), OP_COLUMN: OP_PUT}
    assert got[0]["id"] == Decimal(2**64 - 2)
    assert (got[1]["id"], got[1][OP_COLUMN]) == (Decimal(2**64 - 2), OP_DELETE)


@pytest.mark.spark
def test_common_handle_deletes_take_key_columns_from_the_old_value_or_the_handle(spark):
    info = make_info([("name", "varchar(10)"), ("n", "int"), ("v", "int")], is_common_handle=True)
    info.indices = [IndexInfo(1, "PRIMARY", [IndexColumn("name", 0), IndexColumn("n", 1)], unique=True, primary=True)]
    row = {"name": "Ab", "n": 3, "v": 9}
    handle = row_handle(info, row)
    key = record_key(info.id, handle)
    value = encode_row(info, row)
    got = run_decoder(info, [
        (info.id, 10, OP_PUT, key, value, b""),
        (info.id, 11, OP_DELETE, key, b"", value),
        (info.id, 12, OP_DELETE, key, b"", b""),
    ])
    assert got[0] == {**expected_put(info, handle, value, 10), OP_COLUMN: OP_PUT}
    assert [(r["name"], r["n"]) for r in got] == [("Ab", 3)] * 3


def test_common_handle_rows_carry_the_key_they_had_before_the_window():
    """'ab' -> 'ab  ' under utf8mb4_bin keeps the raw key (PAD SPACE: the handle holds 'ab'). The
    old value handed to mount is the row before the window, which is the replica row to change."""
    info = make_info([("name", "varchar(10)"), ("n", "int")], is_common_handle=True)
    info.indices = [IndexInfo(1, "PRIMARY", [IndexColumn("name", 0)], unique=True, primary=True)]
    before, after = {"name": "ab", "n": 1}, {"name": "ab  ", "n": 2}
    key = record_key(info.id, row_handle(info, before))
    assert key == record_key(info.id, row_handle(info, after))
    old, new = encode_row(info, before), encode_row(info, after)
    match = match_columns(info)["name"]
    got = run_decoder(info, [
        (info.id, 10, OP_PUT, key, new, old),  # update of a row the replica holds as 'ab'
        (info.id, 11, OP_PUT, key, new, b""),  # insert: nothing before the window
        (info.id, 12, OP_DELETE, key, b"", old),
        (info.id, 13, OP_PUT, key, new, b"\x80"),  # an undecodable old value: the row's own key
    ], match=True)
    want_before = decode_row(old, info, row_handle(info, before))["name"]
    want_after = decode_row(new, info, row_handle(info, after))["name"]
    assert [(r["name"], r[match]) for r in got] == [
        (want_after, want_before), (want_after, want_after), (want_before, want_before), (want_after, want_after),
    ]
    assert want_before != want_after


def test_the_driver_makes_one_decoder_per_table_info_object_and_schema(monkeypatch):
    """mount_arrow keeps a TableInfo's decoder (and its compiled row plans) for the next window of
    the same info object: the rows equal the Spark path's decoder; another info object, even an
    equal one (a history loaded again), gets its own."""
    from tidelake.merge import mount as mount_module

    made = []
    real_init = mount_module._BatchDecoder.__init__

    def init(self, *args, **kwargs):
        made.append(args[0])
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(mount_module._BatchDecoder, "__init__", init)
    info = make_info([("id", "bigint"), ("vc", "varchar(64)")], pk_is_handle=True)
    info.columns[0].field_type.flag |= 2  # PRI_KEY_FLAG: id is the handle
    rows = [(info.id, 10 + i, OP_PUT, record_key(info.id, i), encode_row(info, {"id": i, "vc": f"v{i}"}), b"")
            for i in range(3)]
    changes = pa.Table.from_batches([changes_batch(rows)])
    expected = run_decoder(info, rows)
    made.clear()
    first = mount_module.mount_arrow(changes, info, replica_struct(info)).to_pylist()
    again = mount_module.mount_arrow(changes, info, replica_struct(info)).to_pylist()
    assert first == again == expected
    assert made == [info]
    other = TableInfo.from_json(info.to_json())
    assert mount_module.mount_arrow(changes, other, replica_struct(other)).to_pylist() == first
    assert made == [info, other]
