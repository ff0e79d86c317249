"""Watermark rows of retired physical ids leave the lake once no replica can merge with them.

Real delta-rs tables: DDL rows as the puller writes them (ddl_jobs), a replica catalog, replica
checkpoints as Delta txn actions, and the lander's own watermark rewrites.
"""

from __future__ import annotations

import copy
import threading

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from lake.ddl_jobs import DdlFeed, Upstream

from tidelake.capture.landing.app_txn import commit_properties
from tidelake.capture.landing.lander import Lander
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.codec.ddl_job import ActionType
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import read_by_puller, read_watermarks


@pytest.fixture
def open_lander(layout):
    landers = []

    def open_(changefeed: str = "cf") -> Lander:
        lander = Lander(layout, changefeed, flush_interval_s=3600, prune_interval_s=0)
        landers.append(lander)
        return lander

    yield open_
    for lander in landers:
        lander.close()


def _set_checkpoint(path: str, ts: int) -> None:
    """A merge commit on the replica recording checkpoint `ts` (what tidelake.merge writes)."""
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}), mode="append",
                    commit_properties=commit_properties(MERGE_APP_ID, ts))


def _truncated_shop() -> tuple[Upstream, DdlFeed, int, int, int]:
    """shop.orders created, then truncated: (upstream, feed, old id, new id, TRUNCATE commit ts)."""
    up = Upstream()
    up.create_schema("shop")
    up.create_table("shop", "orders", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    old = up.table("shop", "orders").id
    job = feed.run(up.truncate_table("shop", "orders"))
    return up, feed, old, up.table("shop", "orders").id, job.finished_ts


def _land(lander: Lander, feed: DdlFeed, resolved: dict[int, int], ddl_resolved: int) -> None:
    lander.add_ddl(feed.rows)
    for pid, ts in resolved.items():
        lander.resolve(pid, ts)
    lander.resolve_ddl(ddl_resolved)
    lander.flush()


def _replica(layout, up: Upstream, feed: DdlFeed, old: int) -> str:
    """The catalog entry of the table that held `old`; returns its replica path."""
    (table,) = SchemaHistory(feed.rows).tables()
    assert table == old  # the table key is the first logical id
    return ReplicaCatalog(layout).assign(table, "shop", "orders", up.ts).path


def test_truncated_id_goes_once_the_replica_checkpoint_is_past_the_truncate(layout, open_lander):
    up, feed, old, new, truncated_at = _truncated_shop()
    lander = open_lander()
    _land(lander, feed, {old: truncated_at - 1, new: up.ts}, up.ts)
    path = _replica(layout, up, feed, old)
    _set_checkpoint(path, truncated_at)

    lander.flush()

    assert read_watermarks(layout).table_resolved == {new: up.ts}
    assert lander.durable_watermarks() == ({new: up.ts}, up.ts)


def test_truncated_id_stays_while_the_replica_is_before_the_truncate(layout, open_lander):
    up, feed, old, new, truncated_at = _truncated_shop()
    lander = open_lander()
    _land(lander, feed, {old: truncated_at - 1, new: up.ts}, up.ts)
    path = _replica(layout, up, feed, old)
    _set_checkpoint(path, truncated_at - 1)  # at the TRUNCATE's barrier, not past it

    lander.resolve(new, up.ts + 1)
    lander.flush()

    assert read_watermarks(layout).table_resolved == {old: truncated_at - 1, new: up.ts + 1}


def test_id_of_a_table_without_replica_stays(layout, open_lander):
    up, feed, old, new, truncated_at = _truncated_shop()
    lander = open_lander()
    _land(lander, feed, {old: truncated_at - 1, new: up.ts}, up.ts)
    ReplicaCatalog(layout).upsert([])  # the catalog exists, this table has no replica yet

    lander.flush()

    assert set(read_watermarks(layout).table_resolved) == {old, new}


def test_dropped_table_ids_go_once_its_replica_is_marked_dropped(layout, open_lander):
    up = Upstream()
    up.create_schema("shop")
    up.create_table("shop", "orders", [("id", "bigint", "pk")], partitions=["p0", "p1"])
    up.create_table("shop", "users", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    orders, users = up.table("shop", "orders"), up.table("shop", "users")
    parts = [d.id for d in orders.partition.definitions]
    dropped = feed.run(up.drop_table("shop", "orders"))
    lander = open_lander()
    _land(lander, feed, {**{p: dropped.finished_ts - 1 for p in parts}, users.id: up.ts}, up.ts)
    catalog = ReplicaCatalog(layout)
    entry = catalog.assign(orders.id, "shop", "orders", up.ts)
    _set_checkpoint(entry.path, dropped.finished_ts - 1)  # merged up to the DROP's barrier

    lander.flush()
    assert set(read_watermarks(layout).table_resolved) == {*parts, users.id}

    catalog.mark_dropped(orders.id, dropped.finished_ts)
    lander.flush()
    assert read_watermarks(layout).table_resolved == {users.id: up.ts}


def test_pruning_does_not_lose_a_concurrent_watermark_write(layout, open_lander):
    up, feed, old, new, truncated_at = _truncated_shop()
    lander = open_lander("cf-0")
    _land(lander, feed, {old: truncated_at - 1, new: up.ts}, up.ts)
    _set_checkpoint(_replica(layout, up, feed, old), truncated_at)
    other = WatermarkWriter(layout, "tidelake-puller/cf-1")  # another shard, still holding `old`
    rounds = 8
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run(step) -> None:
        start.wait()
        try:
            for i in range(1, rounds + 1):
                step(i)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    def prune_and_flush(i: int) -> None:
        lander.resolve(new, up.ts + i)
        lander.flush()

    def write_other(i: int) -> None:
        assert other.write({old: truncated_at - 1, 555: up.ts + i}, up.ts, 0, 0, seq=i)

    threads = [threading.Thread(target=run, args=(f,)) for f in (prune_and_flush, write_other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    by_puller = read_by_puller(layout)
    assert by_puller["tidelake-puller/cf-0"].marks.table_resolved == {new: up.ts + rounds}
    assert by_puller["tidelake-puller/cf-1"].marks.table_resolved == {old: truncated_at - 1, 555: up.ts + rounds}


def test_recovered_table_gets_its_ids_back(layout, open_lander):
    up = Upstream()
    up.create_schema("shop")
    up.create_table("shop", "orders", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    info = copy.deepcopy(up.table("shop", "orders"))
    db_id = up.db_id("shop")
    dropped = feed.run(up.drop_table("shop", "orders"))
    lander = open_lander()
    _land(lander, feed, {info.id: dropped.finished_ts - 1}, up.ts)
    ReplicaCatalog(layout).assign(info.id, "shop", "orders", up.ts)
    ReplicaCatalog(layout).mark_dropped(info.id, dropped.finished_ts)
    lander.flush()
    assert read_watermarks(layout).table_resolved == {}

    # RECOVER TABLE lands in the same flush as the join's first resolve of the old id.
    landed = len(feed.rows)
    up.tables[info.id] = (db_id, info)
    recovered = feed.run(up._job(ActionType.RECOVER_TABLE, db_id, info.id, "RECOVER TABLE orders", info))
    lander.add_ddl(feed.rows[landed:])
    lander.resolve(info.id, recovered.finished_ts)
    lander.resolve_ddl(up.ts)
    lander.flush()
    lander.flush()  # the next look sees the table live again

    assert read_watermarks(layout).table_resolved == {info.id: recovered.finished_ts}
