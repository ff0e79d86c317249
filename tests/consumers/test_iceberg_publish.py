"""Replicas published as Iceberg (tidelake.consumers.iceberg): at every syncpoint pyiceberg and
DuckDB's iceberg extension read exactly the rows of the Delta version of the cut, an older tag
still reads the older rows after an UPDATE, a DELETE and an ADD COLUMN, no Parquet file is
copied, and a second sync publishes nothing.

Replicas here are written with delta-rs and the cuts recorded by record_syncpoint, so these run in
seconds without Spark; replicas Spark writes (column mapping, RENAME COLUMN, its timestamps) are in
tests/consumers/test_iceberg_spark_replica.py.
"""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from consumers.iceberg_readers import assert_iceberg_reads_the_cut
from deltalake import DeltaTable, write_deltalake

from tidelake import tso
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.publish import DELTA_TABLE, DELTA_VERSION, PUBLISHED_TS, syncpoint_tag
from tidelake.consumers.iceberg.retention import keep_readable
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.object_store import lake_storage_options
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, read_syncpoints, record_syncpoint

FIRST, SECOND = tso.compose(1_800_000_000_000), tso.compose(1_800_000_060_000)
ORDERS = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string()), pa.field("amount", pa.decimal128(12, 2)),
                    pa.field("at", pa.timestamp("us", tz="UTC")), pa.field("day", pa.date32()),
                    pa.field("local", pa.timestamp("us")), pa.field("tags", pa.list_(pa.string()))])
# names Delta accepts only with column mapping, as tidelake's replica_schema turns it on for them
# (delta-rs drops the columnMapping reader feature when timestampNtz upgrades the protocol: no DATETIME here)
ODD = pa.schema([pa.field("id", pa.int32()), pa.field("my note", pa.string()), pa.field("a,b", pa.float64())])
COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


def _orders(ids: range) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "note": f"n'{i}", "amount": Decimal(f"{i}.25"),
                                  "at": datetime(2026, 1, 1, i % 24, tzinfo=timezone.utc),
                                  "day": datetime(2026, 2, 1 + i % 27).date(), "local": datetime(2026, 3, 1, i % 24),
                                  "tags": [f"t{i}", None]}
                                 for i in ids], schema=ORDERS)


def _odd(ids: range) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "my note": f"odd {i}", "a,b": i / 3 if i % 4 else None} for i in ids],
                                schema=ODD)


def _cut(layout: LakeLayout, ts: int) -> Syncpoint:
    catalog = ReplicaCatalog(layout)
    replicas = [ReplicaAt(key, "shop", catalog.get(key).path.rsplit("/", 1)[1], catalog.get(key).path,
                          DeltaTable(catalog.get(key).path).version()) for key in (1, 2)]
    assert record_syncpoint(layout, Syncpoint(ts, replicas))
    return Syncpoint(ts, replicas)


def _first_cut(tmp_path: Path) -> tuple[LakeLayout, str, str, Syncpoint]:
    """shop.orders (plain) and shop.odd (column mapping), cut at FIRST."""
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    catalog = ReplicaCatalog(layout)
    orders = catalog.assign(1, "shop", "orders", FIRST - 10).path
    odd = catalog.assign(2, "shop", "odd", FIRST - 10).path
    write_deltalake(orders, _orders(range(0, 6)))
    write_deltalake(orders, _orders(range(6, 9)), mode="append")
    write_deltalake(odd, _odd(range(0, 5)), configuration=COLUMN_MAPPING)
    return layout, orders, odd, _cut(layout, FIRST)


def _change(orders: str, odd: str) -> None:
    """orders sees an UPDATE, a DELETE and an ADD COLUMN, odd an append."""
    DeltaTable(orders).update(updates={"note": "'changed'"}, predicate="id < 3")
    DeltaTable(orders).delete("id = 7")
    wider = _orders(range(20, 22)).append_column("extra", pa.array(["x", None], pa.string()))
    write_deltalake(orders, wider, mode="append", schema_mode="merge")
    write_deltalake(odd, _odd(range(5, 8)), mode="append")


@pytest.fixture
def lake(tmp_path) -> LakeLayout:
    """_first_cut, _change, and SECOND is cut."""
    layout, orders, odd, _ = _first_cut(tmp_path)
    _change(orders, odd)
    _cut(layout, SECOND)
    return layout


def _parquet_files(root: Path) -> set[Path]:
    return set(root.rglob("*.parquet"))


def test_every_reader_reads_the_delta_rows_of_every_cut_and_no_file_is_copied(lake):
    before = _parquet_files(Path(lake.root))
    catalog = open_catalog(lake, IcebergConfig())
    report = sync_iceberg(catalog, lake)
    # neither table was published before: each starts at the newest syncpoint
    assert [(p.table, p.ts) for p in report.published] == [("shop.orders", SECOND), ("shop.odd", SECOND)]
    assert _parquet_files(Path(lake.root)) == before  # metadata and manifests only (Avro and JSON)
    assert_iceberg_reads_the_cut(catalog, read_syncpoints(lake)[-1])
    data_files = {task.file.file_path for task in catalog.load_table(("shop", "orders")).scan().plan_files()}
    assert data_files == set(DeltaTable(ReplicaCatalog(lake).get(1).path).file_uris())  # the replica's own files


def test_each_syncpoint_is_its_own_tagged_snapshot_and_older_tags_read_older_rows(tmp_path):
    layout, orders, odd, first = _first_cut(tmp_path)
    catalog = open_catalog(layout, IcebergConfig())
    assert len(sync_iceberg(catalog, layout).published) == 2
    _change(orders, odd)
    second = _cut(layout, SECOND)
    report = sync_iceberg(catalog, layout)
    assert [(p.table, p.ts, p.delta_version) for p in report.published] == [(r.qualified_name, SECOND, r.version)
                                                                            for r in second.replicas]
    for cut in (first, second):
        assert_iceberg_reads_the_cut(catalog, cut)
    table = catalog.load_table(("shop", "orders"))
    assert table.properties[PUBLISHED_TS] == str(SECOND)
    tagged = table.snapshot_by_id(table.refs()[syncpoint_tag(SECOND)].snapshot_id)
    assert tagged.summary[DELTA_VERSION] == str(second.replicas[0].version)
    assert tagged.summary[PUBLISHED_TS] == str(SECOND)
    assert tagged.summary.operation.value == "overwrite"  # the rewritten and deleted files left in one snapshot
    assert [f.name for f in table.schema().fields][-1] == "extra"
    again = sync_iceberg(catalog, layout)
    assert (again.published, again.current) == ([], 2)
    assert catalog.load_table(("shop", "orders")).metadata_location == table.metadata_location


def test_a_rename_by_rewrite_keeps_the_old_name_readable_at_the_older_tag(tmp_path):
    """Without column mapping tidelake renames and drops a column by rewriting the replica in one
    overwrite commit (docs/operations.md#ddl-support): the new files name the new column, the older
    snapshot's files the old one, and both resolve through the name mapping."""
    layout, orders, _, first = _first_cut(tmp_path)
    catalog = open_catalog(layout, IcebergConfig())
    sync_iceberg(catalog, layout)
    renamed = DeltaTable(orders).to_pyarrow_table().rename_columns(["id", "memo", "amount", "at", "day", "local", "tags"])
    write_deltalake(orders, renamed.drop_columns(["day"]), mode="overwrite", schema_mode="overwrite")
    second = _cut(layout, SECOND)
    assert [p.table for p in sync_iceberg(catalog, layout).published] == ["shop.orders", "shop.odd"]
    for cut in (first, second):
        assert_iceberg_reads_the_cut(catalog, cut)
    mapping = {name: f.field_id for f in catalog.load_table(("shop", "orders")).name_mapping() for name in f.names}
    assert {"note", "memo", "day"} <= mapping.keys() and mapping["note"] != mapping["memo"]


def test_a_table_dropped_and_created_again_is_published_from_its_new_replica_and_both_are_held(tmp_path):
    """Upstream DROP TABLE then CREATE TABLE of the same name: a new replica at a new path, the same
    Iceberg table. Its next snapshot shows the new replica, the older tag still the old one, and
    maintenance holds each replica's files for the snapshots that show it."""
    layout, old, _, first = _first_cut(tmp_path)
    catalog = open_catalog(layout, IcebergConfig())
    sync_iceberg(catalog, layout)
    new = ReplicaCatalog(layout).assign(3, "shop", "orders", SECOND - 10).path
    write_deltalake(new, _orders(range(40, 43)))
    assert new != old
    second = Syncpoint(SECOND, [ReplicaAt(3, "shop", "orders", new, 0)])
    assert record_syncpoint(layout, second)
    assert [p.table for p in sync_iceberg(catalog, layout).published] == ["shop.orders"]
    table = catalog.load_table(("shop", "orders"))
    assert table.properties[DELTA_TABLE] == new
    summaries = {tag: table.snapshot_by_id(table.refs()[syncpoint_tag(ts)].snapshot_id).summary
                 for tag, ts in (("first", FIRST), ("second", SECOND))}
    assert (summaries["first"][DELTA_TABLE], summaries["second"][DELTA_TABLE]) == (old, new)
    assert_iceberg_reads_the_cut(catalog, second)
    assert_iceberg_reads_the_cut(catalog, Syncpoint(FIRST, [r for r in first.replicas if r.name == "orders"]))
    holds = keep_readable(catalog, layout, 7 * 86400, tso.physical_ms(SECOND))
    assert (holds.holds[old].version, holds.holds[new].version) == (first.replicas[0].version, 0)


def test_an_object_store_lake_is_published_and_read_through_its_storage_options(s3_server, tmp_path):
    root = s3_server.lake_root("iceberg")
    layout = LakeLayout(root, lake_storage_options(root, s3_server.storage_options(), environ={}))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    orders = ReplicaCatalog(layout).assign(1, "shop", "orders", FIRST - 10).path
    write_deltalake(orders, _orders(range(0, 4)), storage_options=layout.storage_options)
    replicas = [ReplicaAt(1, "shop", "orders", orders, 0)]
    assert record_syncpoint(layout, Syncpoint(FIRST, replicas))
    catalog = open_catalog(layout, IcebergConfig(catalog_uri=f"sqlite:///{tmp_path / 'catalog.db'}"))
    assert [p.table for p in sync_iceberg(catalog, layout).published] == ["shop.orders"]
    assert catalog.load_table(("shop", "orders")).metadata_location.startswith(f"{root}/_tidelake/iceberg/shop/orders/")
    assert_iceberg_reads_the_cut(catalog, Syncpoint(FIRST, replicas), layout)
