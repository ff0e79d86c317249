"""DuckDB's read of a replica checked against delta-rs's read of the same Delta version: an
independent reader (deltalake), every column of every row; tests/consumers/test_duckdb_lake.py."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from merge.lake_fixtures import sorted_rows

from tidelake.consumers.duckdb_lake import offline_connection, read_version
from tidelake.lake.layout import LakeLayout

def _comparable(value: Any) -> Any:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted_rows([{k: _comparable(v) for k, v in row.items()} for row in rows])


def assert_same_rows(duckdb_table: pa.Table, expected: list[dict[str, Any]], why: str = "") -> None:
    """DuckDB's rows equal `expected` (another reader's), column by column."""
    got, want = _rows(duckdb_table.to_pylist()), _rows(expected)
    assert len(got) == len(want), (why, len(got), len(want))
    for name in duckdb_table.schema.names:
        assert [r[name] for r in got] == [r[name] for r in want], (why, name)


def assert_duckdb_reads_as_deltalake(duckdb_table: pa.Table, path: str, version: int, why: str = "",
                                     storage_options: dict[str, str] | None = None) -> None:
    """Same columns in the same order with the same Arrow types, same rows."""
    expected = DeltaTable(path, version=version, storage_options=storage_options).to_pyarrow_table()
    assert duckdb_table.schema.names == expected.schema.names, (why, duckdb_table.schema.names, expected.schema.names)
    types = {f.name: (e.type, f.type) for f, e in zip(duckdb_table.schema, expected.schema, strict=True) if f.type != e.type}
    assert not types, (why, types)
    assert_same_rows(duckdb_table, expected.to_pylist(), why)


def duckdb_read(layout: LakeLayout, table: str, version: int) -> pa.Table:
    """Replica `db.table` at `version` as `tidelake duckdb` reads it."""
    return read_version(offline_connection(), layout, table, version).to_arrow_table()


def duckdb_read_path(path: str, version: int) -> pa.Table:
    """A Delta table the catalog does not list (a history table) at `version`, on the same connection."""
    return offline_connection().sql(f"SELECT * FROM delta_scan('{path}', version => {version})").to_arrow_table()
