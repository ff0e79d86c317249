"""Maintenance never vacuums a Parquet file an Iceberg snapshot within [iceberg].retention still
lists (tidelake.consumers.iceberg.retention, tidelake.maintenance.vacuum_hold): after a DELETE
rewrote a replica's file, a VACUUM with retention 0 keeps it while the older syncpoint's tag is
within the retention (the tag still reads the Delta version's rows), and once the tag is past
the retention the tag is expired and the file goes. An unreachable catalog stops maintenance
before it touches anything.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pyarrow as pa
import pytest
from consumers.iceberg_readers import assert_iceberg_reads_the_cut
from deltalake import DeltaTable, write_deltalake

from tidelake import tso
from tidelake.capture.landing.app_txn import commit_properties
from tidelake.cli import main
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.publish import syncpoint_tag
from tidelake.consumers.iceberg.retention import keep_readable
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.maintenance.lake_upkeep import run_maintenance
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint

HOUR_MS = 3_600_000


def _cut(layout: LakeLayout, path: str, ts: int) -> Syncpoint:
    syncpoint = Syncpoint(ts, [ReplicaAt(1, "shop", "orders", path, DeltaTable(path).version())])
    assert record_syncpoint(layout, syncpoint)
    return syncpoint


def _files(path: str) -> set[str]:
    return {p.name for p in Path(path).glob("*.parquet")}


@pytest.mark.spark
def test_vacuum_keeps_the_files_of_snapshots_within_the_retention_and_lets_older_ones_go(spark, tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    now_ms = time.time_ns() // 1_000_000
    older, newer = tso.compose(now_ms - 2 * HOUR_MS), tso.compose(now_ms - 60_000)
    path = ReplicaCatalog(layout).assign(1, "shop", "orders", older - 10).path
    write_deltalake(path, pa.table({"id": pa.array(range(4), pa.int64()), "note": [f"n{i}" for i in range(4)]}),
                    commit_properties=commit_properties(MERGE_APP_ID, older - 1))  # a replica with a checkpoint
    catalog = open_catalog(layout, IcebergConfig())
    first = _cut(layout, path, older)
    sync_iceberg(catalog, layout)
    first_files = _files(path)
    DeltaTable(path).delete("id = 0")  # rewrites the only file
    second = _cut(layout, path, newer)
    sync_iceberg(catalog, layout)
    assert first_files - _files(path) == set()  # nothing vacuumed yet

    within = keep_readable(catalog, layout, 24 * 3600, now_ms)
    assert within.expired == [] and within.holds[path].version == 0
    report = run_maintenance(spark, layout, vacuum_retention_hours=0, optimize=False, changelog_retention=False,
                             merge_log=False, vacuum_holds=within.holds)
    assert path in report.vacuumed
    # the age of the DELETE's version (seconds) plus the hour of margin
    assert re.fullmatch(rf"replica of shop\.orders vacuumed keeping 1\.\d hours of removed files, not 0: Iceberg "
                        rf"snapshot \d+ \({syncpoint_tag(older)}\) of shop\.orders shows Delta version 0",
                        report.held[path]), report.held[path]
    assert first_files <= _files(path)
    assert_iceberg_reads_the_cut(catalog, first)

    past = keep_readable(catalog, layout, 1 * 3600, now_ms)  # the older cut is 2 hours back
    assert past.expired == [f"shop.orders {syncpoint_tag(older)}"] and past.holds[path].version == 1
    orders = catalog.load_table(("shop", "orders"))
    assert syncpoint_tag(older) not in orders.refs() and len(orders.snapshots()) == 1
    report = run_maintenance(spark, layout, vacuum_retention_hours=0, optimize=False, changelog_retention=False,
                             merge_log=False, vacuum_holds=past.holds)
    assert path in report.vacuumed and path not in report.held
    assert not first_files & _files(path)  # the rewritten file went
    assert_iceberg_reads_the_cut(catalog, second)


def test_maintenance_with_an_unreachable_catalog_is_one_line_exit_75_before_it_touches_anything(tmp_path, capsys):
    """Without the catalog the guard cannot know which files a snapshot lists: nothing is vacuumed."""
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    path = ReplicaCatalog(layout).assign(1, "shop", "orders", 1).path
    write_deltalake(path, pa.table({"id": [1]}), commit_properties=commit_properties(MERGE_APP_ID, 1))
    uri = "postgresql+psycopg2://tidelake:s3cret@127.0.0.1:9/catalog?connect_timeout=2"
    config = tmp_path / "changefeed.toml"
    config.write_text(f'[changefeed]\nid = "cf1"\n[upstream]\npd = ["127.0.0.1:2379"]\n[lake]\nroot = "{layout.root}"\n'
                      f'[iceberg]\ncatalog_uri = "{uri}"\n')
    assert main(["maintenance", "--config", str(config)]) == 75
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tidelake: error: Iceberg catalog postgresql+psycopg2://tidelake:***@")
    assert DeltaTable(path).version() == 0 and "VACUUM" not in str(DeltaTable(path).history())


def test_maintenance_of_an_s3_lake_without_its_catalog_refuses_to_vacuum_in_one_line(s3_server, tmp_path, monkeypatch,
                                                                                     capsys):
    """`--lake s3://...` alone cannot reach the catalog; the lake records that it has one."""
    for name, value in s3_server.storage_options().items():
        monkeypatch.setenv(name, value)
    root = s3_server.lake_root("unguarded")
    layout = LakeLayout(root)
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    path = ReplicaCatalog(layout).assign(1, "shop", "orders", 1).path
    write_deltalake(path, pa.table({"id": [1]}), commit_properties=commit_properties(MERGE_APP_ID, 1),
                    storage_options=layout.storage_options)
    assert record_syncpoint(layout, Syncpoint(tso.compose(1_800_000_000_000), [ReplicaAt(1, "shop", "orders", path, 0)]))
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    assert main(["iceberg", "sync", "--lake", root, "--catalog-uri", catalog_uri]) == 0
    capsys.readouterr()
    assert main(["maintenance", "--lake", root]) == 2
    err = capsys.readouterr().err
    assert err == (f"tidelake: error: {root}: its replicas are published as Iceberg to the catalog tidelake at "
                   f"{catalog_uri} ({root}/_tidelake/iceberg/catalog.json), which no [iceberg].catalog_uri names here: "
                   "vacuuming without it could delete files its snapshots list; pass --config with that catalog, "
                   "or --skip vacuum\n")
    assert DeltaTable(path, storage_options=layout.storage_options).version() == 0
