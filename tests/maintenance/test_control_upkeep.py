"""Maintenance vacuums the control tables rewritten in place: every flush rewrites the watermarks,
and the files it replaced stay on the store until a VACUUM past the table's own deleted-file
retention deletes them; the tables read the same after it."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable
from merge.lake_fixtures import FedLake

from tidelake.lake.replica_catalog import ReplicaCatalog, catalog_path
from tidelake.lake.watermarks import read_watermarks
from tidelake.maintenance.lake_upkeep import run_maintenance
from tidelake.maintenance.replica_upkeep import DELTA_RS
from tidelake.merge.merge_run import run_merge

from maintenance.test_lake_upkeep import NoSpark

RETENTION = "delta.deletedFileRetentionDuration"


def on_store(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*.parquet")}


def live(path: str) -> set[str]:
    return {str(Path(uri.removeprefix("file://")).relative_to(path)) for uri in DeltaTable(path).file_uris()}


def test_rewritten_control_tables_keep_only_their_live_files_past_their_retention(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    for n, table in enumerate(("a", "b", "c")):
        lake.ddl(lake.up.create_table("shop", table, [("id", "bigint", "pk")]))
        with lake.txn() as t:
            t.put("shop", table, {"id": n})
        lake.resolve()
        run_merge(None, lake.layout)
    lake.close()
    layout = lake.layout
    assert len(on_store(layout.watermarks)) > len(live(layout.watermarks))  # the replaced files are still there
    DeltaTable(layout.watermarks).alter.set_table_properties({RETENTION: "interval 0 hours"})  # past it now
    watermarks, entries = read_watermarks(layout), ReplicaCatalog(layout).entries()

    report = run_maintenance(NoSpark(), layout, changelog_retention=False)

    assert on_store(layout.watermarks) == live(layout.watermarks)
    for path in (layout.watermarks, layout.ddl, catalog_path(layout)):  # the others within their retention
        assert path in report.vacuumed and report.engines[path] == DELTA_RS
    assert read_watermarks(layout) == watermarks and ReplicaCatalog(layout).entries() == entries
