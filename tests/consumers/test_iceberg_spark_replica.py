"""Replicas Spark writes, published as Iceberg: a column-mapped replica (Parquet columns named
col-<uuid>, field ids in the files) reads right in pyiceberg and DuckDB at the syncpoint before and
after a RENAME COLUMN, an UPDATE, a DELETE and an ADD COLUMN in place, and a replica whose DELETE
left deletion vectors is refused in one line while the other is published; `tidelake verify`'s
Iceberg check (tidelake.verify.iceberg_side) finds the column-mapped one matching.

The tables are made with Spark SQL on delta-spark, as the merge writes replicas (column mapping
turned on as tidelake.merge.replica_schema does), so the test needs no upstream.
"""

from __future__ import annotations

import json

import pytest
from consumers.iceberg_readers import assert_iceberg_reads_the_cut
from deltalake import DeltaTable

from tidelake import tso
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint
from tidelake.verify.iceberg_side import verify_iceberg
from tidelake.verify.verifier import Verdict

pytestmark = pytest.mark.spark

FIRST, SECOND = tso.compose(1_800_000_000_000), tso.compose(1_800_000_060_000)
COLUMNS = "id BIGINT, `my note` STRING, at TIMESTAMP, local TIMESTAMP_NTZ, amount DECIMAL(12,2), day DATE"
ROWS = ", ".join(f"({i}, 'n{i}', TIMESTAMP'2026-01-01 0{i}:00:00 UTC', TIMESTAMP_NTZ'2026-02-01 0{i}:30:00', "
                 f"{i}.25, DATE'2026-03-0{i + 1}')" for i in range(6))


def _cut(layout: LakeLayout, ts: int, tables: dict[int, str]) -> Syncpoint:
    replicas = [ReplicaAt(key, "shop", name, ReplicaCatalog(layout).get(key).path,
                          DeltaTable(ReplicaCatalog(layout).get(key).path).version()) for key, name in tables.items()]
    assert record_syncpoint(layout, Syncpoint(ts, replicas))
    return Syncpoint(ts, replicas)


def test_a_column_mapped_replica_reads_right_across_a_rename_and_deletion_vectors_are_refused(spark, tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    catalog_rows = ReplicaCatalog(layout)
    mapped = catalog_rows.assign(1, "shop", "mapped", FIRST - 10).path
    marked = catalog_rows.assign(2, "shop", "marked", FIRST - 10).path
    spark.sql(f"CREATE TABLE delta.`{mapped}` ({COLUMNS}) USING delta TBLPROPERTIES "
              "('delta.columnMapping.mode' = 'name', 'delta.enableChangeDataFeed' = 'true')")
    plain = COLUMNS.replace("`my note`", "note")  # a name Parquet holds: no column mapping needed
    spark.sql(f"CREATE TABLE delta.`{marked}` ({plain}) USING delta TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true')")
    for path in (mapped, marked):
        spark.sql(f"INSERT INTO delta.`{path}` VALUES {ROWS}")
    tables = {1: "mapped", 2: "marked"}
    first = _cut(layout, FIRST, tables)
    catalog = open_catalog(layout, IcebergConfig())
    report = sync_iceberg(catalog, layout)
    assert [p.table for p in report.published] == ["shop.mapped", "shop.marked"] and not report.refused
    assert_iceberg_reads_the_cut(catalog, first)

    spark.sql(f"ALTER TABLE delta.`{mapped}` RENAME COLUMN `my note` TO memo")
    spark.sql(f"UPDATE delta.`{mapped}` SET memo = 'changed', amount = amount * 2 WHERE id < 2")
    spark.sql(f"DELETE FROM delta.`{mapped}` WHERE id = 4")
    spark.sql(f"ALTER TABLE delta.`{mapped}` ADD COLUMNS (`extra (x)` STRING)")
    spark.sql(f"INSERT INTO delta.`{mapped}` VALUES (9, 'nine', NULL, NULL, 9.99, NULL, 'x')")
    spark.sql(f"DELETE FROM delta.`{marked}` WHERE id = 3")  # a deletion vector, no rewrite
    second = _cut(layout, SECOND, tables)
    report = sync_iceberg(catalog, layout)
    assert [p.table for p in report.published] == ["shop.mapped"]
    assert report.refused["shop.marked"].startswith("shop.marked: not published as Iceberg: 1 files of Delta version ")
    for cut in (first, second):
        assert_iceberg_reads_the_cut(catalog, Syncpoint(cut.ts, [r for r in cut.replicas if r.name == "mapped"]))
    assert_iceberg_reads_the_cut(catalog, Syncpoint(FIRST, [r for r in first.replicas if r.name == "marked"]))
    mapped_at, marked_at = verify_iceberg(spark, catalog, layout)  # `tidelake verify`'s check of the Iceberg side
    assert (mapped_at.status, mapped_at.iceberg_rows, mapped_at.delta_rows) == (Verdict.MATCH, 6, 6), mapped_at.note
    assert (marked_at.status, marked_at.note) == (
        Verdict.SKIPPED, f"not published at syncpoint-{SECOND} yet (newest tag: syncpoint-{FIRST})")
    field_ids = {f.name: f.field_id for f in catalog.load_table(("shop", "mapped")).schema().fields}
    delta_ids = {c["name"]: c["metadata"]["delta.columnMapping.id"]
                 for c in json.loads(DeltaTable(mapped).schema().to_json())["fields"]}
    assert field_ids == delta_ids
