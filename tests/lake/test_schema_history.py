"""SchemaHistory over realistic DDL sequences: jobs as TiDB finishes them, rows as the puller writes them."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
from ddl_jobs import DdlFeed, Upstream
from deltalake import DeltaTable

from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.codec.ddl_job import ActionType, DDLJob
from tidelake.codec.schema import TableInfo
from tidelake.lake.ddl_log import info_json
from tidelake.lake.layout import LakeLayout
from tidelake.lake.schema_history import SchemaHistory


def _shop() -> tuple[Upstream, DdlFeed]:
    up = Upstream()
    up.create_schema("shop")
    up.create_table("shop", "orders", [("id", "bigint", "pk"), ("amount", "int")])
    return up, DdlFeed(up)


def test_snapshot_then_column_ddls_give_one_info_per_window():
    up, feed = _shop()
    start = up.ts
    add = feed.run(up.add_column("shop", "orders", ("note", "varchar(20)", {"default": "n/a"})))
    ren = feed.run(up.rename_column("shop", "orders", "amount", "total"))
    mod = feed.run(up.modify_column("shop", "orders", "total", "bigint"))
    h = SchemaHistory(feed.rows)
    (t,) = h.tables()
    assert t == up.table("shop", "orders").id
    events = h.ddl_events(t)
    assert [e.commit_ts for e in events] == [start, add.finished_ts, ren.finished_ts, mod.finished_ts]
    assert events[0].creates_table and events[0].source == "snapshot"
    assert [c.name for c in h.table_info_at(t, add.finished_ts - 1).columns] == ["id", "amount"]
    assert [c.name for c in h.table_info_at(t, add.finished_ts + 1).columns] == ["id", "amount", "note"]
    assert h.table_info_at(t, ren.finished_ts + 1).column_by_name("total").id == 2
    assert h.table_info_at(t, start - 1) is None
    nxt = h.next_ddl_after(t, start)
    assert nxt.commit_ts == add.finished_ts and nxt.barrier == add.finished_ts - 1
    assert nxt.action == ActionType.ADD_COLUMN
    assert nxt.table_info_before.max_col_id == 2 and nxt.table_info_after.max_col_id == 3
    assert h.next_ddl_after(t, add.finished_ts - 1) is nxt
    assert h.next_ddl_after(t, mod.finished_ts) is None


def test_truncate_keeps_identity_and_maps_the_new_physical_id():
    up, feed = _shop()
    old_id = up.table("shop", "orders").id
    job = feed.run(up.truncate_table("shop", "orders"))
    new_id = up.table("shop", "orders").id
    assert new_id != old_id
    h = SchemaHistory(feed.rows)
    assert h.tables() == [old_id]
    assert h.physical_ids_at(old_id, job.finished_ts - 1) == [old_id]
    assert h.physical_ids_at(old_id, job.finished_ts) == [new_id]
    event = h.next_ddl_after(old_id, job.finished_ts - 1)
    assert event.action == ActionType.TRUNCATE_TABLE and event.removed_physical_ids == [old_id]
    assert h.all_physical_ids(old_id) == [old_id, new_id]
    assert h.table_of_physical_id(new_id) == old_id
    # a DDL after the truncate still lands on the same table
    later = feed.run(up.add_column("shop", "orders", ("c", "int")))
    assert SchemaHistory(feed.rows).next_ddl_after(old_id, job.finished_ts).job_id == later.id


def test_rename_across_databases_keeps_identity_and_tracks_names():
    up, feed = _shop()
    feed.run(up.create_schema("archive"))
    t = up.table("shop", "orders").id
    job = feed.run(up.rename_table("shop", "orders", "archive", "orders_2025"))
    h = SchemaHistory(feed.rows)
    assert h.tables() == [t]
    assert h.name_at(t, job.finished_ts - 1) == ("shop", "orders")
    assert h.name_at(t, job.finished_ts) == ("archive", "orders_2025")
    event = h.ddl_events(t)[-1]
    assert (event.db_before, event.name_before, event.db, event.name) == ("shop", "orders", "archive", "orders_2025")
    assert h.find("ARCHIVE", "Orders_2025") == t and h.find("shop", "orders") is None


def _swap() -> tuple[DdlFeed, DDLJob, dict[str, int]]:
    up, feed = _shop()
    feed.run(up.create_table("shop", "orders_new", [("id", "bigint", "pk"), ("amount", "int"), ("note", "int")]))
    ids = {n: up.table("shop", n).id for n in ("orders", "orders_new")}
    job = feed.run(up.rename_tables("shop", [("orders", "tmp"), ("orders_new", "orders"), ("tmp", "orders_new")]))
    return feed, job, ids


def test_rename_tables_swap_lands_each_table_once_under_its_final_name():
    feed, job, ids = _swap()
    assert [t.name for t in job.multiple_table_infos] == ["tmp", "orders", "orders_new"]
    rows = [r for r in feed.rows if r.job_id == job.id]
    assert sorted((r.table_id, r.table_name) for r in rows) == sorted(
        [(ids["orders"], "orders_new"), (ids["orders_new"], "orders")])
    h = SchemaHistory(feed.rows)
    assert h.name_at(ids["orders"], job.finished_ts) == ("shop", "orders_new")
    assert h.name_at(ids["orders_new"], job.finished_ts) == ("shop", "orders")
    assert h.find("shop", "orders") == ids["orders_new"]


def test_rename_tables_rows_landed_with_an_intermediate_name_fold_to_the_last():
    """Rows an older puller landed (one per pair): one event per table, the last pair's name."""
    feed, job, ids = _swap()
    before = [r for r in feed.rows if r.job_id != job.id]
    (a,) = [r for r in feed.rows if r.job_id == job.id and r.table_id == ids["orders"]]
    tmp = TableInfo.from_json(a.table_info)
    tmp.name = "tmp"
    landed = [replace(a, table_name="tmp", table_info=info_json(tmp))] + [r for r in feed.rows if r.job_id == job.id]
    h = SchemaHistory(before + landed)
    events = [e for e in h.ddl_events(ids["orders"]) if e.job_id == job.id]
    assert [(e.name_before, e.name) for e in events] == [("orders", "orders_new")]
    assert h.next_ddl_after(ids["orders"], job.finished_ts - 1).name == "orders_new"


def test_exchange_partition_moves_physical_ids_and_the_normal_table_follows_its_new_id():
    up = Upstream()
    up.create_schema("s")
    feed = DdlFeed(up)
    feed.run(up.create_table("s", "pt", [("id", "bigint", "pk")], partitions=["p0", "p1"]))
    feed.run(up.create_table("s", "nt", [("id", "bigint", "pk")]))
    pt, nt = up.table("s", "pt").id, up.table("s", "nt").id
    p0, p1 = up.table("s", "pt").physical_ids()
    job = feed.run(up.exchange_partition("s", "pt", "p0", "nt"))
    later = feed.run(up.add_column("s", "nt", ("c", "int")))
    h = SchemaHistory(feed.rows)
    assert sorted(h.job_tables(job.id, job.finished_ts)) == sorted([pt, nt])
    assert (h.physical_ids_at(pt, job.finished_ts - 1), h.physical_ids_at(pt, job.finished_ts)) == ([p0, p1], [nt, p1])
    assert (h.physical_ids_at(nt, job.finished_ts - 1), h.physical_ids_at(nt, job.finished_ts)) == ([nt], [p0])
    event = h.next_ddl_after(nt, job.finished_ts - 1)
    assert (event.name, event.removed_physical_ids) == ("nt", [nt])
    assert h.next_ddl_after(nt, job.finished_ts).job_id == later.id  # keyed by nt's new id: same table


def test_partitions_add_drop_truncate_change_physical_ids():
    up = Upstream()
    up.create_schema("s")
    feed = DdlFeed(up)
    create = feed.run(up.create_table("s", "p", [("id", "bigint", "pk"), ("v", "int")], partitions=["p0", "p1"]))
    t = up.table("s", "p").id
    p0, p1 = (d.id for d in up.table("s", "p").partition.definitions)
    add = feed.run(up.add_partition("s", "p", "p2"))
    p2 = up.table("s", "p").partition.definitions[-1].id
    trunc = feed.run(up.truncate_partition("s", "p", "p0"))
    p0_new = up.table("s", "p").partition.definitions[0].id
    drop = feed.run(up.drop_partition("s", "p", "p1"))
    h = SchemaHistory(feed.rows)
    assert h.ddl_events(t)[0].job_id == create.id and h.ddl_events(t)[0].creates_table
    assert h.physical_ids_at(t, add.finished_ts - 1) == [p0, p1]
    assert h.physical_ids_at(t, add.finished_ts) == [p0, p1, p2]
    assert h.physical_ids_at(t, trunc.finished_ts) == [p0_new, p1, p2]
    assert h.physical_ids_at(t, drop.finished_ts) == [p0_new, p2]
    removed = [e.removed_physical_ids for e in h.ddl_events(t)[1:]]
    assert removed == [[], [p0], [p1]]


def test_drop_table_and_drop_database_end_tables():
    up, feed = _shop()
    up_t = up.table("shop", "orders").id
    feed.run(up.create_table("shop", "items", [("id", "bigint", "pk")]))
    items = up.table("shop", "items").id
    dropped = feed.run(up.drop_table("shop", "items"))
    gone = feed.run(up.drop_schema("shop"))
    h = SchemaHistory(feed.rows)
    assert set(h.tables()) == {up_t, items} and h.live_tables() == []
    assert h.ddl_events(items)[-1].drops_table and h.ddl_events(items)[-1].commit_ts == dropped.finished_ts
    last = h.ddl_events(up_t)[-1]
    assert last.drops_table and last.action == ActionType.DROP_SCHEMA and last.commit_ts == gone.finished_ts
    assert h.table_info_at(up_t, gone.finished_ts) is None and h.name_at(up_t, gone.finished_ts) is None
    assert h.table_info_at(up_t, gone.finished_ts - 1) is not None


def test_multi_schema_change_and_index_and_comment_are_events_with_infos():
    up, feed = _shop()
    t = up.table("shop", "orders").id
    feed.run(up.add_index("shop", "orders"))
    multi = feed.run(up.multi_change("shop", "orders", ("note", "text"), "amount"))
    feed.run(up.set_comment("shop", "orders", "hot"))
    h = SchemaHistory(feed.rows)
    actions = [e.action for e in h.ddl_events(t)]
    assert actions == [ActionType.CREATE_TABLE, ActionType.ADD_INDEX, ActionType.MULTI_SCHEMA_CHANGE,
                       ActionType.MODIFY_TABLE_COMMENT]
    assert [c.name for c in h.table_info_at(t, multi.finished_ts).columns] == ["id", "note"]


def test_load_from_the_ddl_table_equals_rows(tmp_path):
    up, feed = _shop()
    feed.run(up.add_column("shop", "orders", ("c", "int")))
    layout = LakeLayout(str(tmp_path))
    log = DdlWriter(layout, "puller-1")
    log.insert(feed.rows, seq=1)
    log.insert(feed.rows, seq=2)  # a replayed delivery is stored once
    loaded = SchemaHistory.load(layout)
    direct = SchemaHistory(feed.rows)
    t = direct.tables()[0]
    assert loaded.tables() == direct.tables()
    assert [e.commit_ts for e in loaded.ddl_events(t)] == [e.commit_ts for e in direct.ddl_events(t)]
    assert SchemaHistory.load(LakeLayout(str(tmp_path / "empty"))).tables() == []


def test_unknown_table_is_an_input_error():
    from tidelake.errors import InputError

    with pytest.raises(InputError, match="not in the DDL history"):
        SchemaHistory([]).ddl_events(42)


def test_merge_table_selection_is_case_insensitive_and_names_a_table_once():
    from tidelake.errors import InputError

    up, feed = _shop()
    history = SchemaHistory(feed.rows)
    orders = up.table("shop", "orders").id
    assert history.select(["shop.orders", "SHOP.Orders", "shop.orders"]) == [orders]
    with pytest.raises(InputError, match="'shop.nope' is not in the DDL history"):
        history.select(["shop.nope"])


def test_a_live_table_is_found_by_its_current_tidb_id_with_its_database_and_last_info():
    up, feed = _shop()
    feed.run(up.create_schema("archive"))
    first = up.table("shop", "orders").id
    feed.run(up.truncate_table("shop", "orders"))
    feed.run(up.rename_table("shop", "orders", "archive", "orders_2025"))
    now = up.table("archive", "orders_2025")
    h = SchemaHistory(feed.rows)
    schema_id, info = h.live_table(now.id)
    assert schema_id == up.db_id("archive") and info.name == "orders_2025" and info.id == now.id
    assert h.live_table(first) is None  # the id before the truncate is no table's now
    feed.run(up.drop_table("archive", "orders_2025"))
    assert SchemaHistory(feed.rows).live_table(now.id) is None


def test_a_loaded_version_is_folded_once_and_a_new_version_or_a_new_table_is_read(tmp_path):
    """SchemaHistory.load keeps the fold of a version of the `ddl` table: the same version gives the
    same history without a read; a new DDL (a new version) and a folder made again (another table,
    its version numbers starting over) are read."""
    up, feed = _shop()
    layout = LakeLayout(str(tmp_path / "lake"))
    DdlWriter(layout, "puller-1").insert(feed.rows, seq=1)
    first = SchemaHistory.load(layout)
    version = DeltaTable(layout.ddl).version()
    assert SchemaHistory.load(layout) is first
    t = first.tables()[0]
    add = feed.run(up.add_column("shop", "orders", ("c", "int")))
    DdlWriter(layout, "puller-1").insert(feed.rows, seq=2)
    later = SchemaHistory.load(layout)
    assert later is not first
    assert [c.name for c in later.table_info_at(t, add.finished_ts).columns] == ["id", "amount", "c"]
    assert SchemaHistory.load(layout, version=version) is first  # a pinned read of the version folded
    shutil.rmtree(layout.ddl)
    up2 = Upstream()
    up2.create_schema("shop")
    up2.create_table("shop", "others", [("id", "bigint", "pk")])
    feed2 = DdlFeed(up2)
    DdlWriter(layout, "puller-1").insert(feed2.rows, seq=1)
    again = SchemaHistory.load(layout)
    assert [again.current_name(k) for k in again.tables()] == [("shop", "others")]
