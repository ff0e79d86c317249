"""Maintenance vacuums the control tables rewritten in place: every flush rewrites the watermarks,
and the files it replaced stay on the store until a VACUUM past the table's own deleted-file
retention deletes them, also those whose removal a later checkpoint dropped from the log (the
retention past, a checkpoint keeps no tombstone); the tables read the same after it."""

from __future__ import annotations

import time
from pathlib import Path

from deltalake import DeltaTable
from merge.lake_fixtures import FedLake
from maintenance.test_lake_upkeep import NoSpark

from tidelake.lake.layout import WATERMARKS_PROPERTIES
from tidelake.lake.replica_catalog import ReplicaCatalog, catalog_path
from tidelake.lake.watermarks import read_watermarks
from tidelake.maintenance.lake_upkeep import run_maintenance
from tidelake.maintenance.replica_upkeep import DELTA_RS
from tidelake.merge.merge_run import run_merge

RETENTION = "delta.deletedFileRetentionDuration"
CHECKPOINT_EVERY = int(WATERMARKS_PROPERTIES["delta.checkpointInterval"])


def on_store(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*.parquet")}


def live(path: str) -> set[str]:
    return {str(Path(uri.removeprefix("file://")).relative_to(path)) for uri in DeltaTable(path).file_uris()}


def test_rewritten_control_tables_lose_the_files_removed_past_their_retention(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    layout = lake.layout
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "a", [("id", "bigint", "pk")]))
    with lake.txn() as t:
        t.put("shop", "a", {"id": 1})
    for _ in range(3):
        lake.resolve()
    run_merge(None, layout)
    DeltaTable(layout.watermarks).alter.set_table_properties({RETENTION: "interval 1 seconds"})
    replaced = on_store(layout.watermarks) - live(layout.watermarks)
    assert replaced  # the rewritten flushes' files are still there
    time.sleep(1.5)  # their removals are past the retention now
    for _ in range(CHECKPOINT_EVERY + 1):  # a checkpoint since: it keeps none of their tombstones
        lake.resolve()
    lake.close()
    watermarks, entries = read_watermarks(layout), ReplicaCatalog(layout).entries()

    report = run_maintenance(NoSpark(), layout, changelog_retention=False)

    assert not replaced & on_store(layout.watermarks)
    assert live(layout.watermarks) <= on_store(layout.watermarks)
    for path in (layout.watermarks, layout.ddl, catalog_path(layout)):  # the others within their retention
        assert path in report.vacuumed and report.engines[path] == DELTA_RS
    assert read_watermarks(layout) == watermarks and ReplicaCatalog(layout).entries() == entries
