"""run_merge(rebuild=...) replays a table from its CREATE into a new replica folder that equals
the upstream at the same checkpoint; the old folder is left as it was (one tiny scenario: Spark is
slow on the shared machine)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, replica_rows

from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.merge_run import run_merge

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


def test_rebuild_replays_the_table_into_a_new_replica_equal_to_upstream(spark, tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "note": "a"})
        t.put("shop", "orders", {"id": 2, "note": "b"})
    lake.ddl(lake.up.add_column("shop", "orders", ("qty", "int")))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 2, "note": "b2", "qty": 5})
        t.delete("shop", "orders", {"id": 1, "note": "a"})
    upper = lake.resolve()
    key = SchemaHistory.load(lake.layout).find("shop", "orders")
    run_merge(spark, lake.layout)
    old = ReplicaCatalog(lake.layout).get(key).path
    old_version = DeltaTable(old).version()

    report = run_merge(spark, lake.layout, rebuild="shop.orders")
    new = ReplicaCatalog(lake.layout).get(key).path
    assert new != old and [t.table for t in report.tables] == ["shop.orders"]
    assert report.tables[0].ddls_applied == 2  # CREATE and ADD COLUMN replayed
    assert read_checkpoint(new) == read_checkpoint(old) == upper
    assert replica_rows(spark, new) == lake.expected_rows("shop", "orders", upper)
    assert DeltaTable(old).version() == old_version
    lake.close()
