"""A DML transaction that commits at exactly a DDL's commit ts (async commit and 1PC compute commit
ts, so TiDB can produce this; TiCDC cdc/entry/mounter.go mountRowKVEntry says so). Its rows must
land once, and the replica at checkpoint D must equal the upstream read at D, which decodes them
with the schema after the DDL (docs/design.md#dml-at-a-ddls-commit-ts)."""

from __future__ import annotations

import copy

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, replica_rows, sorted_rows

from tidelake.lake.checkpoint import read_checkpoint, version_at_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


def test_rows_at_a_ddls_commit_ts_land_with_the_ddl_in_the_commit_of_its_checkpoint(spark, tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    for name in ("orders", "items"):
        lake.ddl(lake.up.create_table("shop", name, [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    with lake.txn() as t:
        for name in ("orders", "items"):
            t.put("shop", name, {"id": 1, "note": "one"})
            t.put("shop", name, {"id": 2, "note": "two"})
    old_orders, old_items = (copy.deepcopy(lake.up.table("shop", name)) for name in ("orders", "items"))
    added = lake.ddl(lake.up.add_column("shop", "orders", ("flag", "int", {"default": "7"})))
    with lake.txn(commit_ts=added) as t:  # began before the DDL, async-committed at its ts
        t.put("shop", "orders", {"id": 1, "note": "at the ddl"}, written_with=old_orders)
        t.put("shop", "orders", {"id": 3, "note": "new at the ddl"}, written_with=old_orders)
        t.delete("shop", "orders", {"id": 2})
    truncated = lake.ddl(lake.up.truncate_table("shop", "items"))
    with lake.txn(commit_ts=truncated) as t:  # into the truncated physical id at the truncate: gone with it
        t.put("shop", "items", {"id": 4, "note": "truncated"}, written_with=old_items)
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 5, "note": "after", "flag": 1})
        t.put("shop", "items", {"id": 5, "note": "after"})
    for pid in old_items.physical_ids():  # the puller resolves the retired id up to its truncate
        lake.lander.resolve(pid, truncated)
    upper = lake.resolve()

    results = {r.table: r for r in run_merge(spark, lake.layout).tables}
    for name in ("orders", "items"):
        result = results[f"shop.{name}"]
        assert result.status == MergeStatus.MERGED and result.ddls_applied == 2 and result.checkpoint_after == upper
        path = ReplicaCatalog(lake.layout).get(result.table_key).path
        assert read_checkpoint(path) == upper
        assert replica_rows(spark, path) == lake.expected_rows("shop", name, upper)
    path = ReplicaCatalog(lake.layout).get(results["shop.orders"].table_key).path
    at_ddl = version_at_checkpoint(path, added)
    assert DeltaTable(path, version=at_ddl).transaction_version("tidelake-merge") == added
    rows_at_ddl = sorted_rows([r.asDict() for r in spark.read.format("delta").option("versionAsOf", at_ddl)
                               .load(path).collect()])
    assert rows_at_ddl == lake.expected_rows("shop", "orders", added)
    assert {r["id"]: r["flag"] for r in rows_at_ddl} == {1: 7, 3: 7}  # read at D with the schema after the DDL
    lake.close()
