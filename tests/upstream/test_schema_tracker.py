"""SchemaTracker: which physical ids are fed, moved forward by finished DDL jobs."""

from __future__ import annotations

import pytest

from tests.capture.tidb_writes import db_json, table_json
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import SchemaSnapshot
from tidelake.upstream.schema_tracker import SchemaTracker

SHOP, OTHER, MYSQL = 2, 3, 1


def snapshot(ts: int = 10, tables: dict[int, list[dict]] | None = None) -> SchemaSnapshot:
    dbs = [DBInfo.from_json(db_json(MYSQL, "mysql")), DBInfo.from_json(db_json(SHOP, "shop")),
           DBInfo.from_json(db_json(OTHER, "other"))]
    tables = tables if tables is not None else {
        MYSQL: [table_json(5, "user")],
        SHOP: [table_json(110, "orders"), table_json(130, "events", [131, 132])],
        OTHER: [table_json(150, "scratch")],
    }
    return SchemaSnapshot(ts, 1, dbs, {db: [TableInfo.from_json(t) for t in ts_] for db, ts_ in tables.items()})


def job(action: ActionType, schema_id: int, table_id: int = 0, table: dict | None = None,
        db: dict | None = None, **kw) -> DDLJob:
    return DDLJob(id=kw.pop("id", 500), type=action, schema_id=schema_id, table_id=table_id, state=JobState.DONE,
                  schema_version=kw.pop("schema_version", 7), table_info=TableInfo.from_json(table) if table else None,
                  db_info=DBInfo.from_json(db) if db else None, **kw)


def no_reload(ts: int) -> SchemaSnapshot:
    raise AssertionError(f"unexpected reload at {ts}")


@pytest.fixture
def tracker() -> SchemaTracker:
    return SchemaTracker(snapshot(), TableFilter.parse(["shop.*", "*.*", "!other.*"]), no_reload)


def test_snapshot_maps_partitions_to_their_table_and_skips_system_and_filtered(tracker):
    replicated = tracker.replicated()
    assert sorted(replicated) == [110, 131, 132]
    assert replicated[131].logical_id == 130 and replicated[131].table == "events" and replicated[131].db == "shop"
    assert tracker.lookup(150) is None and tracker.lookup(5) is None
    assert [d.name for d in tracker.selected_dbs()] == ["shop"]


def test_create_table_joins_and_drop_leaves(tracker):
    created = tracker.apply(job(ActionType.CREATE_TABLE, SHOP, 111, table_json(111, "items")), 20)
    assert created.relevant and sorted(created.joined) == [111] and not created.left
    assert created.joined[111].table == "items"
    dropped = tracker.apply(job(ActionType.DROP_TABLE, SHOP, 111, table_json(111, "items")), 30)
    assert dropped.relevant and sorted(dropped.left) == [111] and not dropped.joined
    assert [t.table for t in dropped.touched] == ["items"]  # named as before the drop
    assert 111 not in tracker.replicated() and tracker.ts == 30


def test_a_table_named_in_another_case_is_found_and_added_as_tidb_names_compare(tracker):
    assert sorted(tracker.named("OTHER", "Scratch")) == [150]  # filtered out, still found by name
    joined = tracker.add_tables([("Other", "SCRATCH")])
    assert sorted(joined) == [150] and sorted(tracker.replicated()) == [110, 131, 132, 150]
    assert not tracker.named("other", "scratch2")


def test_filtered_table_jobs_are_not_relevant(tracker):
    effect = tracker.apply(job(ActionType.CREATE_TABLE, OTHER, 151, table_json(151, "t")), 20)
    assert not effect.relevant and not effect.joined
    assert not tracker.apply(job(ActionType.ADD_COLUMN, OTHER, 150, table_json(150, "scratch")), 21).relevant


def test_truncate_swaps_the_physical_id(tracker):
    effect = tracker.apply(job(ActionType.TRUNCATE_TABLE, SHOP, 110, table_json(112, "orders")), 20)
    assert sorted(effect.joined) == [112] and sorted(effect.left) == [110]
    assert tracker.lookup(112).logical_id == 112


def test_partition_changes_add_and_remove_physical_ids(tracker):
    def events(action: ActionType, partition_ids: list[int]) -> DDLJob:
        return job(action, SHOP, 130, table_json(130, "events", partition_ids))

    effect = tracker.apply(events(ActionType.ADD_TABLE_PARTITION, [131, 132, 133]), 20)
    assert sorted(effect.joined) == [133] and effect.joined[133].logical_id == 130 and not effect.left
    effect = tracker.apply(events(ActionType.TRUNCATE_TABLE_PARTITION, [134, 132, 133]), 21)
    assert sorted(effect.joined) == [134] and sorted(effect.left) == [131]
    effect = tracker.apply(events(ActionType.DROP_TABLE_PARTITION, [133]), 22)
    assert sorted(effect.left) == [132, 134] and not effect.joined


def test_rename_is_evaluated_against_the_filter(tracker):
    out = tracker.apply(job(ActionType.RENAME_TABLE, OTHER, 110, table_json(110, "orders")), 20)
    assert sorted(out.left) == [110] and out.relevant
    back = tracker.apply(job(ActionType.RENAME_TABLE, SHOP, 110, table_json(110, "orders2")), 21)
    assert sorted(back.joined) == [110] and back.joined[110].table == "orders2"
    inside = tracker.apply(job(ActionType.RENAME_TABLE, SHOP, 110, table_json(110, "orders3")), 22)
    assert inside.relevant and not inside.joined and not inside.left and tracker.lookup(110).table == "orders3"


def test_schema_jobs(tracker):
    created = tracker.apply(job(ActionType.CREATE_SCHEMA, 4, db=db_json(4, "shop")), 20)
    assert created.relevant and not created.joined  # selected by shop.*, no tables yet
    dropped = tracker.apply(job(ActionType.DROP_SCHEMA, SHOP), 21)
    assert dropped.relevant and sorted(dropped.left) == [110, 131, 132]
    assert tracker.replicated() == {}


def test_multi_object_jobs_reload_the_schema_at_their_finished_ts():
    loads = []

    def reload(ts: int) -> SchemaSnapshot:
        loads.append(ts)
        return snapshot(ts, {SHOP: [table_json(150, "scratch")], OTHER: [table_json(110, "orders")]})

    tracker = SchemaTracker(snapshot(), TableFilter.parse(["shop.*"]), reload)
    effect = tracker.apply(job(ActionType.RENAME_TABLES, SHOP), 40)  # swap orders <-> scratch
    assert loads == [40]
    assert sorted(effect.joined) == [150] and sorted(effect.left) == [110, 131, 132]
    newer_tidb = DDLJob(id=9, type=999, schema_id=SHOP, state=JobState.DONE, schema_version=9)
    unknown = tracker.apply(newer_tidb, 50)
    assert loads == [40, 50] and not unknown.joined


def test_restore_takes_tables_back_to_the_finished_jobs_view_before_a_running_job_is_pulled():
    # TiDB's meta mid-job: a DROP PARTITION has taken 132 out, a RENAME has moved orders out of shop.
    mid_job = snapshot(tables={SHOP: [table_json(130, "events", [131])], OTHER: [table_json(110, "orders")]})
    tracker = SchemaTracker(mid_job, TableFilter.parse(["shop.*"]), no_reload)
    assert sorted(tracker.replicated()) == [131]
    tracker.restore({130: (SHOP, TableInfo.from_json(table_json(130, "events", [131, 132]))),
                     110: (SHOP, TableInfo.from_json(table_json(110, "orders")))})
    assert sorted(tracker.replicated()) == [110, 131, 132]
    dropped = tracker.apply(job(ActionType.DROP_TABLE_PARTITION, SHOP, 130, table_json(130, "events", [131])), 20)
    assert sorted(dropped.left) == [132]
    renamed = tracker.apply(job(ActionType.RENAME_TABLE, OTHER, 110, table_json(110, "orders")), 21)
    assert sorted(renamed.left) == [110]



def test_a_reload_keeps_the_tables_of_jobs_still_running_as_the_finished_jobs_left_them():
    def reload(ts: int) -> SchemaSnapshot:  # a DROP PARTITION of events has taken 132 out, not done
        return snapshot(ts, {SHOP: [table_json(110, "orders"), table_json(130, "events", [131])], OTHER: []})

    running = {40: frozenset({130})}
    tracker = SchemaTracker(snapshot(), TableFilter.parse(["shop.*"]), reload, lambda ts: running.get(ts, frozenset()))
    swap = tracker.apply(job(ActionType.RENAME_TABLES, SHOP, multiple_table_infos=[]), 40)
    assert not swap.left and sorted(tracker.replicated()) == [110, 131, 132]
    dropped = tracker.apply(job(ActionType.DROP_TABLE_PARTITION, SHOP, 130, table_json(130, "events", [131])), 50)
    assert sorted(dropped.left) == [132]


@pytest.mark.parametrize("rules, copied, left", [(["shop.*"], [150], [131]), (["other.*"], [131], [150]),
                                                 (["shop.*", "other.*"], [], [])],
                         ids=["scratch not replicated", "events not replicated", "both replicated"])
def test_an_exchange_copies_the_received_id_only_when_the_other_table_was_not_fed(rules, copied, left):
    """EXCHANGE PARTITION of events' 131 with other.scratch (150): events receives 150, scratch
    131. A table the filter leaves out was never fed, so the id the replicated one receives is read
    at the finished ts; with both replicated, the other replica holds its rows."""
    def reload(ts: int) -> SchemaSnapshot:
        return snapshot(ts, {SHOP: [table_json(110, "orders"), table_json(130, "events", [150, 132])],
                             OTHER: [table_json(131, "scratch")]})

    tracker = SchemaTracker(snapshot(), TableFilter.parse(rules), reload)
    effect = tracker.apply(job(ActionType.EXCHANGE_TABLE_PARTITION, OTHER, 150,
                               table_json(130, "events", [150, 132])), 40)
    assert sorted(effect.copied) == copied
    assert sorted(effect.joined) == copied and sorted(effect.left) == left
