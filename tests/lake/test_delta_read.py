"""read_delta returns the rows written, in the types written (delta-rs's scan hands back view types),
at the DeltaTable's snapshot."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tidelake.lake.delta_read import read_delta, sql_string

SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("n", pa.int64(), nullable=False),
    pa.field("raw", pa.binary()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("facts", pa.struct([pa.field("path", pa.string()), pa.field("tags", pa.list_(pa.string()))])),
])
NAMES = ["plain", "it's", "o''k"]


def _rows(names: list[str], first: int) -> pa.Table:
    return pa.Table.from_pylist([{"name": name, "n": first + i, "raw": bytes([i]), "at": None,
                                  "facts": {"path": f"p/{name}", "tags": [name]}} for i, name in enumerate(names)],
                                schema=SCHEMA)


def _by_n(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["n"])


def test_reads_every_row_in_the_written_types(tmp_path):
    path = str(tmp_path / "t")
    written = [_rows(NAMES, 0), _rows(NAMES, 10)]
    write_deltalake(path, written[0], partition_by=["name"])
    write_deltalake(path, written[1], partition_by=["name"], mode="append")
    table = DeltaTable(path)
    got = read_delta(table)
    assert got.schema == pa.schema(table.schema().to_arrow())
    assert {f.name: f.type for f in got.schema} == {f.name: f.type for f in SCHEMA}
    assert _by_n(got) == _by_n(pa.concat_tables(written).select(got.schema.names))


def test_columns_and_a_quoted_string_predicate(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(NAMES, 0))
    got = read_delta(DeltaTable(path), ["n", "name"], f"name = {sql_string(NAMES[2])} OR name = {sql_string(NAMES[1])}")
    assert got.column_names == ["n", "name"]
    assert _by_n(got) == [{"n": 1, "name": NAMES[1]}, {"n": 2, "name": NAMES[2]}]


def test_reads_the_loaded_version_not_the_latest(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _rows(NAMES[:1], 0))
    pinned = DeltaTable(path)
    write_deltalake(path, _rows(NAMES, 5), mode="overwrite")
    assert [r["n"] for r in read_delta(pinned).to_pylist()] == [0]
    assert sorted(r["n"] for r in read_delta(DeltaTable(path)).to_pylist()) == [5, 6, 7]
