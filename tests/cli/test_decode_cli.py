"""`tidelake decode key|row` through tidelake.cli.main: JSON output and one-line errors (exit 2)."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from tests.codec.codec_tables import BIN, ft, make_table
from tidelake.cli import main
from tidelake.codec import keys
from tidelake.codec import mysql_types as mt
from tidelake.codec.meta_keys import table_info_key
from tidelake.codec.row import encode_row, row_handle
from tidelake.codec.schema import TableInfo

DATA = Path(__file__).parents[1] / "codec" / "data"


def run(capsys, *argv: str) -> tuple[int, object, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else out), err


def write_table(tmp_path: Path, table: TableInfo) -> str:
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table.to_json()))
    return str(path)


def test_record_key_raw_and_encoded(capsys):
    raw = keys.record_key(1, 2)
    assert run(capsys, "decode", "key", raw.hex()) == (
        0,
        {"encoded": False, "kind": "record", "table_id": 1, "handle": 2},
        "",
    )
    code, out, _ = run(capsys, "decode", "key", "0x" + keys.to_region_key(raw).hex())
    assert code == 0 and out == {"encoded": True, "kind": "record", "table_id": 1, "handle": 2}


def test_common_handle_key_untyped_and_typed(capsys, tmp_path):
    key = "7480000000000000645f72016162630000000000fa038000000000000005"  # D8
    assert run(capsys, "decode", "key", key)[1]["handle"] == ["abc", 5]
    table = make_table(
        [("name", ft(mt.TYPE_VARCHAR, **BIN)), ("k", ft(mt.TYPE_LONG))], is_common_handle=True, primary=["name", "k"]
    )
    code, out, _ = run(capsys, "decode", "key", key, "--table-info", write_table(tmp_path, table))
    assert code == 0 and out["handle"] == ["YWJj", 5]  # binary column -> base64


def test_index_key(capsys):
    key = "74800000000000019b5f698000000000000001015257303100000000fb013736383232313130ff3900000000000000f8010000000000000000f7"
    code, out, _ = run(capsys, "decode", "key", key)
    assert code == 0
    assert out == {"encoded": False, "kind": "index", "table_id": 411, "index_id": 1, "values": ["RW01", "768221109", ""]}


def test_meta_key(capsys):
    code, out, _ = run(capsys, "decode", "key", table_info_key(2, 104).hex())
    assert code == 0
    assert out == {"encoded": False, "kind": "meta", "type": "hash", "key": "DB:2", "field": "Table:104", "db_id": 2, "table_id": 104}


def test_decode_row_with_handle_and_key(capsys, tmp_path):
    table = make_table(
        [
            ("id", ft(mt.TYPE_LONGLONG, flag=mt.PRI_KEY_FLAG | mt.NOT_NULL_FLAG)),
            ("amount", ft(mt.TYPE_NEWDECIMAL, flen=10, decimal=2)),
            ("at", ft(mt.TYPE_DATETIME, decimal=0)),
            ("raw", ft(mt.TYPE_BLOB, **BIN)),
        ],
        pk_is_handle=True,
    )
    values = {"id": 9, "amount": Decimal("3.50"), "at": datetime(2024, 5, 6, 7, 8, 9), "raw": b"\x01\x02"}
    path = write_table(tmp_path, table)
    expected = {"id": 9, "amount": "3.50", "at": "2024-05-06T07:08:09", "raw": "AQI="}
    row = encode_row(table, values).hex()
    assert run(capsys, "decode", "row", "--table-info", path, row, "--handle", "9") == (0, expected, "")
    key = keys.to_region_key(keys.record_key(100, row_handle(table, values))).hex()
    assert run(capsys, "decode", "row", "--table-info", path, row, "--key", key)[1] == expected


def test_decode_row_with_upstream_shaped_table_json(capsys):
    table = TableInfo.from_json((DATA / "table_pk_is_handle.json").read_bytes())
    values = {c.name: None for c in table.columns if c.name != table.handle_column().name}
    values.update({c.name: 1 for c in table.columns if c.field_type.tp in mt.INTEGER_TYPES})
    row = encode_row(table, values)
    code, out, _ = run(capsys, "decode", "row", "--table-info", str(DATA / "table_pk_is_handle.json"), row.hex(), "--handle", "3")
    assert code == 0 and out[table.handle_column().name] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["decode", "key", "74zz"], "bad hex character 'z' at character 2"),
        (["decode", "key", "748"], "odd number of hex digits"),
        (["decode", "key", "7480000000000000015f72800000"], "neither an 8-byte int handle"),
        (["decode", "key", "01020304"], "neither a raw table/meta key nor a region-space key"),
    ],
)
def test_bad_keys_exit_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_bad_rows_exit_2_with_one_line(capsys, tmp_path):
    table = make_table([("a", ft(mt.TYPE_LONGLONG)), ("b", ft(mt.TYPE_DOUBLE)), ("g", ft(mt.TYPE_GEOMETRY))])
    path = write_table(tmp_path, table)
    row = encode_row(make_table([("a", ft(mt.TYPE_LONGLONG)), ("b", ft(mt.TYPE_DOUBLE))]), {"a": 2**40, "b": 1.0})
    cases = [
        (row[:-3].hex(), "row value truncated at byte 20: column 2 needs 8 bytes"),
        ("8000010003000100", "truncated at byte 7: 3 null column ids need 3 bytes, 1 left"),
        ("80000100000003" + "0100" + "ff", "column 'g' (id 3) value at byte 9: unsupported column type code 255"),
        ("080263", "unknown datum flag 0x63 at byte 2"),
    ]
    for hex_, message in cases:
        code, out, err = run(capsys, "decode", "row", "--table-info", path, hex_)
        assert code == 2 and out == "", hex_
        assert err.count("\n") == 1 and message in err, err


def test_bad_table_info_exit_2(capsys, tmp_path):
    not_tidb = tmp_path / "x.json"
    not_tidb.write_text('{"hello": 1}')
    code, _, err = run(capsys, "decode", "row", "--table-info", str(not_tidb), "800000000000")
    assert code == 2 and err.count("\n") == 1 and "TableInfo" in err
    code, _, err = run(capsys, "decode", "row", "--table-info", str(tmp_path / "missing.json"), "800000000000")
    assert code == 2 and "cannot read table info" in err
