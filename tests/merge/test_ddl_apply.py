"""apply_ddl on small replicas: schema and rows after, checkpoint in the last commit, reruns are no-ops.

Spark is slow on the shared 2-core machine, so each test walks one table through several DDLs
and reads rows once at the end.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from deltalake import DeltaTable
from lake.ddl_jobs import DdlFeed, Upstream

from tidelake.lake.checkpoint import CHECKPOINT_METADATA_KEY, read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.ddl_apply import (
    BarrierError,
    NeedsBootstrap,
    UnsupportedDDL,
    apply_ddl,
    record_checkpoint,
)
from tidelake.merge.replica_schema import (
    COLUMN_MAPPING,
    PARTITION_ID_COLUMN,
    REPLICA_PROPERTIES,
    TYPE_WIDENING,
    data_type,
    enable_properties,
    key_columns,
    read_replica_struct,
    replica_struct,
)
from tidelake.merge.txn_confs import writer_txn_options
from tidelake.merge.type_change import can_widen
from tidelake.merge.window_spec import leaves_replica_unchanged


def _merge_rows(spark, path, info, rows, ts):
    """Stand-in for a merge: append rows with the checkpoint they reach."""
    writer = spark.createDataFrame(rows, replica_struct(info)).write.format("delta").mode("append")
    for k, v in writer_txn_options(ts).items():
        writer = writer.option(k, v)
    writer.save(path)


def _last_commit(path):
    table = DeltaTable(path)
    return table.version(), table.history(1)[0]


def _apply_next(spark, layout, feed, table, catalog):
    """Apply the table's next DDL after its checkpoint; check invariant 4's bookkeeping."""
    entry = catalog.get(table)
    history = SchemaHistory(feed.rows)
    event = history.next_ddl_after(table, read_checkpoint(entry.path))
    if read_checkpoint(entry.path) < event.barrier:
        record_checkpoint(spark, entry.path, event.barrier)  # what the merge up to the barrier records
    apply_ddl(spark, layout, table, event, catalog)
    version, commit = _last_commit(entry.path)
    assert read_checkpoint(entry.path) == event.commit_ts
    assert json.loads(commit["userMetadata"]) == {CHECKPOINT_METADATA_KEY: event.commit_ts}
    apply_ddl(spark, layout, table, event, catalog)  # rerun: no new commit
    assert _last_commit(entry.path)[0] == version
    return event


@pytest.mark.spark
@pytest.mark.timeout(1800)  # ~20 Delta commits; minutes on a loaded 2-core box, ~1 min otherwise
@pytest.mark.parametrize("in_place", [False, True], ids=["rewritten", "features-on"])
def test_column_ddls_converge_schema_and_rows(spark, tmp_path, in_place):
    """A new replica follows rename, type change and drop by rewrites, keeping no reader feature;
    one that already has column mapping and type widening (replicas made before issue #16)
    follows them in place."""
    layout = LakeLayout(str(tmp_path))
    catalog = ReplicaCatalog(layout)
    up = Upstream()
    up.create_schema("shop")
    feed = DdlFeed(up)
    feed.run(up.create_table("shop", "orders", [("id", "bigint", "pk"), ("qty", "int"), ("code", "int"),
                                                ("gone", "varchar(5)")]))
    t = up.table("shop", "orders").id
    history = SchemaHistory(feed.rows)
    create = history.ddl_events(t)[0]
    apply_ddl(spark, layout, t, create, catalog)
    path = catalog.get(t).path
    assert path == layout.replica_path("shop", "orders")
    assert read_checkpoint(path) == create.commit_ts
    props = DeltaTable(path).metadata().configuration
    assert all(props.get(k) == v for k, v in REPLICA_PROPERTIES.items())

    if in_place:
        enable_properties(spark, path, {**COLUMN_MAPPING, **TYPE_WIDENING})
    up.ts += 1 << 18  # rows are merged between the CREATE and the first DDL
    up.step = 1  # then consecutive DDLs: each barrier is the previous DDL's commit ts, no merge between
    first = feed.run(up.add_column("shop", "orders", ("price", "decimal(8,2)", {"default": "1.50"})))
    feed.run(up.rename_column("shop", "orders", "qty", "quantity"))
    feed.run(up.modify_column("shop", "orders", "quantity", "bigint"))  # widening
    feed.run(up.modify_column("shop", "orders", "code", "varchar(10)"))  # rewrite with cast
    feed.run(up.drop_column("shop", "orders", "gone"))
    with pytest.raises(BarrierError):  # checkpoint still below the ADD COLUMN barrier
        apply_ddl(spark, layout, t, SchemaHistory(feed.rows).ddl_events(t)[1], catalog)
    merged = first.finished_ts - 1
    _merge_rows(spark, path, create.table_info_after, [(1, 5, 7, "x", merged), (2, None, 8, "y", merged)], merged)
    for _ in range(5):
        _apply_next(spark, layout, feed, t, catalog)

    schema = read_replica_struct(path)
    assert [(f.name, f.dataType.simpleString()) for f in schema.fields] == [
        ("id", "bigint"), ("quantity", "bigint"), ("code", "string"), ("price", "decimal(8,2)"),
        ("_tidb_commit_ts", "bigint"),
    ]
    quantity = next(f for f in schema.fields if f.name == "quantity")
    assert bool(quantity.metadata.get("delta.typeChanges")) is in_place  # widened in place, or rewritten
    features = set(DeltaTable(path).protocol().reader_features or [])
    assert features == ({"columnMapping", "typeWidening"} if in_place else set()), features
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, 5, "7", Decimal("1.50"), merged), (2, None, "8", Decimal("1.50"), merged)]


@pytest.mark.spark
@pytest.mark.timeout(1800)  # ~20 Delta commits; minutes on a loaded 2-core box, ~1 min otherwise
def test_partition_and_truncate_ddls_remove_exactly_their_rows(spark, tmp_path):
    layout = LakeLayout(str(tmp_path))
    catalog = ReplicaCatalog(layout)
    up = Upstream()
    up.create_schema("s")
    feed = DdlFeed(up)
    feed.run(up.create_table("s", "p", [("id", "bigint", "pk"), ("v", "int")], partitions=["p0", "p1", "p2"]))
    t = up.table("s", "p").id
    p0, p1, p2 = (d.id for d in up.table("s", "p").partition.definitions)
    create = SchemaHistory(feed.rows).ddl_events(t)[0]
    apply_ddl(spark, layout, t, create, catalog)
    path = catalog.get(t).path
    up.ts += 1 << 18
    up.step = 1
    ts = feed.run(up.truncate_partition("s", "p", "p0")).finished_ts - 1
    _merge_rows(spark, path, create.table_info_after,
                [(1, 1, ts, p0), (2, 2, ts, p1), (3, 3, ts, p2), (4, 4, ts, p2)], ts)
    feed.run(up.drop_partition("s", "p", "p1"))
    feed.run(up.add_partition("s", "p", "p3"))
    for _ in range(3):
        _apply_next(spark, layout, feed, t, catalog)
    left = spark.read.format("delta").load(path).select("id", PARTITION_ID_COLUMN).collect()
    assert sorted(tuple(r) for r in left) == [(3, p2), (4, p2)]

    feed.run(up.truncate_table("s", "p"))
    event = _apply_next(spark, layout, feed, t, catalog)
    assert event.action == 11 and catalog.get(t).path == path  # same replica, same name
    assert spark.read.format("delta").load(path).count() == 0


@pytest.mark.spark
@pytest.mark.timeout(1800)  # ~20 Delta commits; minutes on a loaded 2-core box, ~1 min otherwise
def test_rename_drop_and_unsupported(spark, tmp_path):
    layout = LakeLayout(str(tmp_path))
    catalog = ReplicaCatalog(layout)
    up = Upstream()
    up.create_schema("a")
    up.create_schema("b")
    feed = DdlFeed(up)
    feed.run(up.create_table("a", "t", [("id", "int")]))
    t = up.table("a", "t").id
    apply_ddl(spark, layout, t, SchemaHistory(feed.rows).ddl_events(t)[0], catalog)
    path = catalog.get(t).path
    assert "_tidb_rowid" in read_replica_struct(path).fieldNames()

    feed.run(up.rename_table("a", "t", "b", "t2"))
    _apply_next(spark, layout, feed, t, catalog)
    entry = catalog.get(t)
    assert (entry.db, entry.name, entry.path) == ("b", "t2", path)  # the path never moves

    # a new table under the old name gets its own folder
    feed.run(up.create_table("a", "t", [("id", "int")]))
    t_new = up.table("a", "t").id
    apply_ddl(spark, layout, t_new, SchemaHistory(feed.rows).ddl_events(t_new)[0], catalog)
    assert catalog.get(t_new).path == f"{path}__{t_new}"

    event = SchemaHistory(feed.rows).ddl_events(t)[-1]
    unsupported = type(event)(**{**event.__dict__, "job_id": 999, "commit_ts": event.commit_ts + 5,
                                 "action": 42, "action_name": "exchange partition"})
    record_checkpoint(spark, path, unsupported.barrier)
    with pytest.raises(UnsupportedDDL, match="exchange partition"):
        apply_ddl(spark, layout, t, unsupported, catalog)

    feed.run(up.drop_table("b", "t2"))
    _apply_next(spark, layout, feed, t, catalog)
    assert catalog.get(t).state == ReplicaState.DROPPED and catalog.find("a", "t").table_key == t_new


@pytest.mark.parametrize(
    ("current", "target", "widens"),
    [
        ("tinyint", "int", True), ("smallint", "bigint", True), ("int", "bigint", True), ("bigint", "int", False),
        ("int", "double", True), ("bigint", "double", False), ("bigint", "decimal(20,0)", True),
        ("int", "decimal(9,0)", False), ("float", "double", True), ("double", "float", False),
        ("decimal(8,2)", "decimal(10,3)", True), ("decimal(8,2)", "decimal(9,4)", False),
        ("decimal(8,2)", "decimal(8,2)", False), ("date", "timestamp_ntz", True), ("int", "string", False),
    ],
)
def test_type_widening_follows_delta_rules(current, target, widens):
    assert can_widen(data_type(current), data_type(target)) is widens


def test_replica_columns_and_keys_per_table_kind():
    up = Upstream()
    up.create_schema("s")
    up.create_table("s", "pk", [("id", "bigint", "pk"), ("v", "varchar(5)")])
    up.create_table("s", "nopk", [("v", "int")])
    up.create_table("s", "part", [("id", "bigint", "pk")], partitions=["p0"])
    assert key_columns(up.table("s", "pk")) == ["id"]
    assert key_columns(up.table("s", "nopk")) == ["_tidb_rowid"]
    assert key_columns(up.table("s", "part")) == [PARTITION_ID_COLUMN, "id"]
    assert replica_struct(up.table("s", "nopk")).fieldNames() == ["v", "_tidb_commit_ts", "_tidb_rowid"]
    assert replica_struct(up.table("s", "part")).fieldNames() == ["id", "_tidb_commit_ts", PARTITION_ID_COLUMN]


def test_tables_that_join_with_rows_need_a_bootstrap(tmp_path):
    layout = LakeLayout(str(tmp_path))
    up = Upstream()
    up.create_schema("s")
    up.create_table("s", "old", [("id", "bigint", "pk")])  # existed before the changefeed started
    feed = DdlFeed(up)
    t = up.table("s", "old").id
    with pytest.raises(NeedsBootstrap, match="bootstrap"):
        apply_ddl(None, layout, t, SchemaHistory(feed.rows).ddl_events(t)[0])
    assert ReplicaCatalog(layout).get(t) is None  # nothing claims a replica


def test_only_ddls_that_leave_the_replica_unchanged_are_passed_by_a_window():
    """Judged from the job's action and its before/after TableInfo, as the puller landed them."""
    from tidelake.codec import mysql_types as mt
    from tidelake.lake.watermarks import Watermarks
    from tidelake.merge.table_plan import plan_table

    up = Upstream()
    up.create_schema("s")
    feed = DdlFeed(up)
    feed.run(up.create_table("s", "t", [("id", "bigint", "pk"), ("v", "int")]))
    passing = [feed.run(up.add_index("s", "t")), feed.run(up.set_comment("s", "t", "c1"))]
    cutting = [feed.run(up.add_column("s", "t", ("w", "int"))), feed.run(up.rename_column("s", "t", "w", "x")),
               feed.run(up.modify_column("s", "t", "x", "bigint")), feed.run(up.drop_column("s", "t", "x")),
               feed.run(up.rename_table("s", "t", "s", "t2"))]
    passing.append(feed.run(up.set_comment("s", "t2", "c2")))
    cutting.append(feed.run(up.truncate_table("s", "t2")))
    history = SchemaHistory(feed.rows)
    table = history.find("s", "t2")
    events = {e.job_id: e for e in history.ddl_events(table)}
    assert [leaves_replica_unchanged(events[j.id]) for j in passing] == [True] * len(passing)
    assert [leaves_replica_unchanged(events[j.id]) for j in cutting] == [False] * len(cutting)

    # TiDB marks indexed columns with key flags (addIndexColumnFlag): still no change to the replica
    event = events[passing[0].id]
    flagged = event.table_info_after.column_by_name("v")
    flagged.field_type.flag |= mt.MULTIPLE_KEY_FLAG
    assert leaves_replica_unchanged(event)
    flagged.field_type.flag &= ~mt.MULTIPLE_KEY_FLAG

    # the plan runs from the CREATE across ADD INDEX and COMMENT and stops at ADD COLUMN's barrier
    create = history.ddl_events(table)[0]
    resolved = cutting[-1].finished_ts + 10
    info_ids = history.physical_ids_at(table, create.commit_ts)
    marks = Watermarks({pid: resolved for pid in info_ids}, resolved, 1)
    plan = plan_table(table, create.commit_ts, marks, history, passes=leaves_replica_unchanged)
    assert plan.chunks == ((create.commit_ts, cutting[0].finished_ts - 1),)
    plan = plan_table(table, create.commit_ts, marks, history)
    assert plan.upper == passing[0].finished_ts - 1  # without `passes` ADD INDEX is a barrier
