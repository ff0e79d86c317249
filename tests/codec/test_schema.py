"""Schema JSON model. Fixtures in tests/codec/data are hand-built from docs/encoding.md#schema-json in TiDB's
exact key spelling and Go field order; they are not captured from a live cluster."""

import json
from pathlib import Path

import pytest

from tidelake.codec.mysql_types import (
    TYPE_BIT,
    TYPE_ENUM,
    TYPE_LONG,
    is_binary_string,
    is_unsigned,
)
from tidelake.codec.schema import (
    ColumnInfo,
    DBInfo,
    FieldType,
    IndexColumn,
    IndexInfo,
    PartitionDefinition,
    PartitionInfo,
    TableInfo,
)
from tidelake.errors import InputError

DATA = Path(__file__).parent / "data"
TABLE_FIXTURES = ["table_pk_is_handle.json", "table_common_handle.json", "table_partitioned.json"]


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize("name", TABLE_FIXTURES)
def test_tidb_json_round_trips_exactly(name: str) -> None:
    raw = _load(name)
    table = TableInfo.from_json((DATA / name).read_bytes())
    assert table.to_json() == raw
    assert list(table.to_json()) == list(raw)
    assert TableInfo.from_json(json.dumps(table.to_json())) == table


def test_pk_is_handle_table() -> None:
    table = TableInfo.from_json(_load("table_pk_is_handle.json"))
    assert (table.id, table.name, table.pk_is_handle, table.is_common_handle) == (110, "sbtest1", True, False)
    handle = table.handle_column()
    assert handle is not None and handle.name == "id" and handle.field_type.flag == 515
    assert table.primary_index() is None  # an int handle PK has no IndexInfo
    assert table.column_by_name("k") is table.column_by_name("K") is table.columns[1]
    assert table.columns[1].name == "K"
    assert table.column_by_id(3).field_type.flen == 120
    bit = table.column_by_name("flags")
    assert bit.field_type.tp == TYPE_BIT and bit.origin_default_bit == b"\x05"
    assert table.physical_ids() == [110]


def test_common_handle_table() -> None:
    table = TableInfo.from_json(_load("table_common_handle.json"))
    assert table.is_common_handle and table.handle_column() is None
    pk = table.primary_index()
    assert pk is not None and [c.name for c in pk.columns] == ["region", "order_id"] and pk.unique
    assert [c.offset for c in pk.columns] == [0, 1]
    status = table.column_by_name("STATUS")
    assert status.field_type.tp == TYPE_ENUM and status.field_type.elems == ["new", "paid", "done"]
    assert is_unsigned(table.column_by_name("order_id").field_type.flag)
    assert table.column_by_name("note").field_type.collate == "utf8mb4_general_ci"
    assert [c.id for c in table.public_columns()] == [1, 2, 3, 4, 5, 6, 8]
    assert table.max_col_id == 8 and table.update_timestamp == 449296098773762049


def test_partitioned_table() -> None:
    table = TableInfo.from_json(_load("table_partitioned.json"))
    assert table.physical_ids() == [131, 132]
    assert [d.name for d in table.partition.definitions] == ["p2023", "pmax"]
    assert [c.name for c in table.public_columns()] == ["id", "day"]  # the hidden expression column is excluded
    table.partition.enable = False
    assert table.physical_ids() == [130]


def test_built_in_python_serialises_like_tidb() -> None:
    ft = FieldType(tp=TYPE_LONG, flag=515, flen=11, decimal=0, charset="binary", collate="binary")
    table = TableInfo(
        id=7,
        name="T1",
        columns=[ColumnInfo(1, "Id", 0, ft), ColumnInfo(2, "v", 1, FieldType(15, 0, 10, 0, "binary", "binary"))],
        indices=[IndexInfo(1, "v_idx", [IndexColumn("v", 1)])],
        pk_is_handle=True,
        partition=PartitionInfo(type=2, expr="`Id`", definitions=[PartitionDefinition(8, "p0"), PartitionDefinition(9, "p1")]),
    )
    out = table.to_json()
    reference = _load("table_pk_is_handle.json")
    assert list(out) == list(reference)  # every TableInfo key, in Go order
    assert list(out["cols"][0]) == list(reference["cols"][0])
    type_keys = ["Tp", "Flag", "Flen", "Decimal", "Charset", "Collate", "Elems", "ElemsIsBinaryLit", "Array"]
    assert list(out["cols"][0]["type"]) == type_keys
    assert out["name"] == {"O": "T1", "L": "t1"} and out["cols"][0]["name"] == {"O": "Id", "L": "id"}
    assert list(out["index_info"][0]) == list(reference["index_info"][0])
    again = TableInfo.from_json(json.dumps(out))
    assert again.handle_column().name == "Id" and again.physical_ids() == [8, 9]
    assert is_binary_string(again.columns[1].field_type) and not is_binary_string(again.columns[0].field_type)


def test_unknown_keys_survive() -> None:
    raw = _load("table_pk_is_handle.json")
    raw["future_key"] = {"x": 1}
    raw["cols"][0]["future_col_key"] = [1, 2]
    table = TableInfo.from_json(raw)
    table.comment = "changed"
    out = table.to_json()
    assert out["future_key"] == {"x": 1} and out["cols"][0]["future_col_key"] == [1, 2] and out["comment"] == "changed"


def test_db_info() -> None:
    raw = _load("db_info.json")
    db = DBInfo.from_json(raw)
    assert (db.id, db.name, db.state) == (2, "Shop", 5)
    assert db.to_json() == raw
    assert list(DBInfo(3, "X").to_json()) == list(raw)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.pop("cols"), "missing key 'cols'"),
        (lambda t: t.pop("id"), "missing key 'id'"),
        (lambda t: t.update(name="sbtest1"), "'name' must be a CIStr"),
        (lambda t: t.update(pk_is_handle="yes"), "'pk_is_handle'"),
        (lambda t: t["cols"][1].pop("type"), r"cols\[1\].*missing key 'type'"),
        (lambda t: t["cols"][0]["type"].pop("Tp"), "missing key 'Tp'"),
        (lambda t: t["cols"][0].update(origin_default_bit="***"), "not base64"),
        (lambda t: t["index_info"][0]["idx_cols"][0].pop("offset"), "missing key 'offset'"),
    ],
)
def test_non_tidb_json_is_a_clear_input_error(mutate, message: str) -> None:
    raw = _load("table_pk_is_handle.json")
    mutate(raw)
    with pytest.raises(InputError, match=message):
        TableInfo.from_json(raw)


def test_not_json_at_all() -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        TableInfo.from_json(b"{nope")
    with pytest.raises(InputError, match="expected a JSON object"):
        TableInfo.from_json("[1, 2]")
    with pytest.raises(InputError, match="missing key 'db_name'"):
        DBInfo.from_json({"id": 1})
