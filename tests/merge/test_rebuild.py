"""When a replica may be rebuilt from the changelog: only while every change since its CREATE is
still there (no Spark: a lake fed through the real lander, retention through its own delete)."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake

from tidelake import tso
from tidelake.capture.landing.changelog_retention import delete_merged_changelog
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.rebuild import deleted_ids, physical_ids_ever, rebuild_refusal, start_rebuild


@pytest.fixture
def lake(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.ddl(lake.up.create_table("shop", "users", [("id", "bigint", "pk")]))
    for i in range(3):
        with lake.txn() as t:
            t.put("shop", "orders", {"id": i, "note": "x"})
            t.put("shop", "users", {"id": i})
    lake.ddl(lake.up.truncate_table("shop", "orders"))  # a second physical id of orders
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 9, "note": "after truncate"})
    lake.resolve()
    yield lake
    lake.close()


def key(lake, name):
    history = SchemaHistory.load(lake.layout)
    return history, history.find("shop", name)


def test_a_table_created_in_the_feed_with_its_whole_changelog_can_be_rebuilt(lake):
    history, orders = key(lake, "orders")
    assert len(physical_ids_ever(history, orders)) == 2
    assert rebuild_refusal(lake.layout, history, orders) is None


def test_retention_of_its_changes_refuses_it_and_of_another_tables_does_not(lake):
    history, orders = key(lake, "orders")
    _, users = key(lake, "users")
    (users_id,) = physical_ids_ever(history, users)
    lake.up.ts = tso.compose(tso.physical_ms(lake.up.ts) + 3 * 3600 * 1000)  # past the rows' commit bucket
    assert delete_merged_changelog(lake.layout, {users_id: lake.resolve()}) == 3
    assert rebuild_refusal(lake.layout, history, orders) is None
    refusal = rebuild_refusal(lake.layout, history, users)
    assert refusal is not None and "retention deleted changes of shop.users" in refusal
    assert "bootstrap" in refusal


def test_delete_predicates_name_their_ids_however_delta_rs_rewrote_them():
    assert deleted_ids("commit_bucket < '2026' AND (table_id = 105 OR table_id = 2)") == {105, 2}
    assert deleted_ids("table_id IN (7, 8) AND commit_bucket < 'x'") == {7, 8}
    assert deleted_ids("commit_bucket < 'x'") is None  # could be any table: refuse


def test_a_rebuild_points_the_catalog_at_a_new_folder_and_keeps_the_old_one(lake, tmp_path):
    history, orders = key(lake, "orders")
    old = ReplicaCatalog(lake.layout).assign(orders, "shop", "orders", 1)
    first = start_rebuild(lake.layout, history, orders)
    assert first.path != old.path and first.path.startswith(old.path + "__rebuilt_")
    assert ReplicaCatalog(lake.layout).get(orders).path == first.path
    second = start_rebuild(lake.layout, history, orders)
    assert second.path.startswith(old.path + "__rebuilt_") and "__rebuilt_" not in second.path[len(old.path) + 10:]


def test_a_log_whose_versions_go_while_it_is_read_refuses_it(lake):
    """The walk from version 0 must reach the newest version: a cleanup racing it removes the oldest
    versions first, and a DELETE could hide in those it did not read."""
    history, orders = key(lake, "orders")
    log_dir = Path(lake.layout.changelog, "_delta_log")
    assert rebuild_refusal(lake.layout, history, orders) is None
    DeltaTable(lake.layout.changelog).create_checkpoint()  # a cleanup deletes only below a checkpoint
    (log_dir / f"{1:020d}.json").unlink()  # the walk reads version 0, then finds 1 gone
    refusal = rebuild_refusal(lake.layout, history, orders)
    assert refusal is not None and "misses versions after 0 (its newest: " in refusal
    (log_dir / f"{0:020d}.json").unlink()
    assert "no longer reaches its first version" in rebuild_refusal(lake.layout, history, orders)
