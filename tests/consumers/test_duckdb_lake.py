"""DuckDB over a lake (tidelake.consumers.duckdb_lake, `tidelake duckdb`): views of the replicas at
their current version, syncpoint cuts and reads as of a Delta version equal delta-rs's read of
the same version (tests/consumers/delta_readers.py), on a local and an s3:// lake; the connection
fetches no extension; bad input is one line and exit 2.

Replicas here are written with delta-rs and the cut recorded by record_syncpoint, so these run
in seconds without Spark; replicas written by the merge (every kind, DDLs, the type zoo) are read
by DuckDB in tests/lake/test_replica_readers.py, tests/merge/test_add_column_every_type.py and
tests/consumers/test_metastore.py.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from consumers.delta_readers import assert_duckdb_reads_as_deltalake
from deltalake import DeltaTable, write_deltalake

from tidelake import tso
from tidelake.cli import main
from tidelake.consumers.duckdb_lake import open_lake, read_syncpoint, read_version
from tidelake.errors import InputError, TidelakeError
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.object_store import lake_storage_options
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint

CUT = tso.compose(1_800_000_000_000)
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string()),
                    pa.field("amount", pa.decimal128(12, 2)), pa.field("at", pa.timestamp("us", tz="UTC"))])


def _rows(ids: range) -> pa.Table:
    from datetime import datetime, timezone
    from decimal import Decimal

    return pa.Table.from_pylist([{"id": i, "note": f"n'{i}", "amount": Decimal(f"{i}.25"),
                                  "at": datetime(2026, 1, 1, i % 24, tzinfo=timezone.utc)} for i in ids], schema=SCHEMA)


@pytest.fixture
def lake(tmp_path) -> LakeLayout:
    """shop.orders and shop.items; a syncpoint at CUT; then orders moves on past the cut."""
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    catalog = ReplicaCatalog(layout)
    cut = []
    for key, name in ((1, "orders"), (2, "items")):
        entry = catalog.assign(key, "shop", name, CUT - 10)
        write_deltalake(entry.path, _rows(range(key * 3)), mode="append")
        cut.append(ReplicaAt(key, "shop", name, entry.path, DeltaTable(entry.path).version()))
    assert record_syncpoint(layout, Syncpoint(CUT, cut))
    orders = catalog.get(1).path
    write_deltalake(orders, _rows(range(10, 14)), mode="append")
    DeltaTable(orders).delete("id = 1")
    return layout


def _path(layout: LakeLayout, key: int) -> str:
    return ReplicaCatalog(layout).get(key).path


def test_views_and_cuts_read_as_delta_rs_reads_the_same_version(lake):
    con = open_lake(lake, [CUT])
    orders, items = _path(lake, 1), _path(lake, 2)
    now = DeltaTable(orders).version()
    assert_duckdb_reads_as_deltalake(con.sql("SELECT * FROM shop.orders").to_arrow_table(), orders, now)
    for schema in (f"shop__sp_{CUT}", "shop__sp_latest"):
        assert_duckdb_reads_as_deltalake(con.sql(f"SELECT * FROM {schema}.orders").to_arrow_table(), orders, 0)
        assert_duckdb_reads_as_deltalake(con.sql(f"SELECT * FROM {schema}.items").to_arrow_table(), items, 0)
    assert_duckdb_reads_as_deltalake(read_syncpoint(con, lake, "shop.orders", CUT).to_arrow_table(), orders, 0)
    for version in range(now + 1):
        assert_duckdb_reads_as_deltalake(read_version(con, lake, "shop.orders", version).to_arrow_table(),
                                         orders, version)
    write_deltalake(orders, _rows(range(20, 21)), mode="append")  # the view reads the newest version
    assert_duckdb_reads_as_deltalake(con.sql("SELECT * FROM shop.orders").to_arrow_table(), orders, now + 1)


def test_the_connection_loads_the_installed_extension_and_fetches_nothing(lake):
    con = open_lake(lake)
    loaded = con.sql("SELECT extension_name, installed FROM duckdb_extensions() WHERE loaded "
                     "AND install_path NOT LIKE '(BUILT-IN)'").fetchall()
    assert sorted(loaded) == [("delta", False), ("httpfs", False)]  # loaded from the packages' files, not installed
    with pytest.raises(duckdb.Error, match="exists in the iceberg extension"):  # not downloaded, not autoloaded
        con.sql("SELECT * FROM iceberg_scan('/nowhere')").fetchall()


def test_bad_names_versions_and_syncpoints_are_one_clear_error(lake):
    con = open_lake(lake)
    with pytest.raises(InputError, match="table shop.nope: no replica of that name in "):
        read_version(con, lake, "shop.nope", 0)
    with pytest.raises(InputError, match="give it as DB.TABLE"):
        read_version(con, lake, "orders", 0)
    with pytest.raises(InputError, match="table shop.orders at version 99: "):
        read_version(con, lake, "shop.orders", 99)
    with pytest.raises(InputError, match=f"{CUT + 1} is not a syncpoint; nearest: {CUT} "):
        read_syncpoint(con, lake, "shop.orders", CUT + 1)
    with pytest.raises(InputError, match=f"table shop.nope is not in the cut of syncpoint {CUT}"):
        read_syncpoint(con, lake, "shop.nope", CUT)
    with pytest.raises(InputError, match=f"{CUT - 1} is not a syncpoint"):
        open_lake(lake, [CUT - 1])


def test_cli_runs_sql_over_views_and_cuts(lake, capsys):
    sql = f"SELECT id, note FROM shop__sp_{CUT}.orders ORDER BY id"
    assert main(["duckdb", "--lake", lake.root, "--syncpoint", str(CUT), "--csv", "-c", sql,
                 "-c", "SELECT count(*) AS n FROM shop.orders"]) == 0
    out = capsys.readouterr().out
    first, second = out.split('"n"\n')
    at_cut = DeltaTable(_path(lake, 1), version=0).to_pyarrow_table().sort_by("id")
    assert list(csv.DictReader(io.StringIO(first))) == [{"id": str(r["id"]), "note": r["note"]}
                                                       for r in at_cut.to_pylist()]
    assert int(second) == DeltaTable(_path(lake, 1)).to_pyarrow_table().num_rows
    assert main(["duckdb", "--lake", lake.root, "-c", "SELECT count(*) FROM shop.items"]) == 0
    assert "│" in capsys.readouterr().out  # DuckDB's table printout


@pytest.mark.parametrize(("args", "expected"), [
    (["--syncpoint", str(CUT + 5), "-c", "SELECT 1"], f"{CUT + 5} is not a syncpoint; nearest: {CUT} "),
    (["-c", "SELECT * FROM shop.nope"], "DuckDB: Catalog Error: Table with name nope does not exist!"),
    (["-c", "SELEC 1"], "DuckDB: Parser Error: syntax error at or near \"SELEC\""),
])
def test_cli_bad_input_is_one_line_and_exit_2(lake, capsys, args, expected):
    assert main(["duckdb", "--lake", lake.root, *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tidelake: error: ") and expected in err, err


def test_a_replica_not_created_yet_has_no_view_and_a_broken_one_is_one_line(lake):
    catalog = ReplicaCatalog(lake)
    catalog.assign(3, "shop", "fresh", CUT)  # its first merge has not committed
    assert [name for (name,) in open_lake(lake).sql("SELECT view_name FROM duckdb_views() WHERE schema_name = 'shop' "
                                                    "ORDER BY 1").fetchall()] == ["items", "orders"]
    items = catalog.get(2).path
    for log in (Path(items) / "_delta_log").glob("*.json"):
        log.write_text("{not json")
    with pytest.raises(TidelakeError, match=f"replica shop.items at {items}: "):
        open_lake(lake)


def test_an_object_store_lake_is_read_through_its_storage_options(s3_server):
    root = s3_server.lake_root("duck")
    layout = LakeLayout(root, lake_storage_options(root, s3_server.storage_options(), environ={}))
    entry = ReplicaCatalog(layout).assign(1, "shop", "orders", CUT - 10)
    write_deltalake(entry.path, _rows(range(3)), mode="append", storage_options=layout.storage_options)
    assert record_syncpoint(layout, Syncpoint(CUT, [ReplicaAt(1, "shop", "orders", entry.path, 0)]))
    write_deltalake(entry.path, _rows(range(5, 7)), mode="append", storage_options=layout.storage_options)
    con = open_lake(layout)
    for sql, version in (("SELECT * FROM shop.orders", 1), ("SELECT * FROM shop__sp_latest.orders", 0)):
        assert_duckdb_reads_as_deltalake(con.sql(sql).to_arrow_table(), entry.path, version, sql, layout.storage_options)
    unsigned = LakeLayout(root, {k: v for k, v in layout.storage_options.items() if "SECRET" not in k})
    with pytest.raises(InputError, match="DuckDB needs access_key_id and secret_access_key"):
        open_lake(unsigned)
