"""The puller runner resolves a dead client's locks (docs/wire.md#stale-locks-on-lagging-regions): the table's watermark
moves past them and the rows it landed equal the simulator's MVCC write records."""

from __future__ import annotations


import pytest

from tests.capture.pull_harness import changelog, make_config, oracle, sim, start_ts, wait_resolved, watermarks  # noqa: F401
from tests.capture.tidb_writes import TiDBWrites
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.eventfeed.client import FeedOptions
from tidelake.codec.keys import record_key, table_record_span, to_region_key

SHOP, ORDERS = 2, 110
FEED = FeedOptions(resolve_lock_lag_s=0.3, resolve_lock_tick_s=0.1, resolve_lock_min_interval_s=0.5)


@pytest.mark.parametrize("primary_committed", [False, True], ids=["rolled_back", "primary_committed"])
def test_runner_lands_past_a_dead_clients_locks(sim, tmp_path, primary_committed):  # noqa: F811
    lake = tmp_path / "lake"
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_table(SHOP, ORDERS, "orders")
    split = to_region_key(record_key(ORDERS, 50))
    sim.split_region(sim.regions.locate(split).id, split)
    primary, secondary = record_key(ORDERS, 10), record_key(ORDERS, 60)
    with PullerThread(make_config(sim, lake), feed=FEED) as runner:
        start = start_ts(lake, runner)
        tidb.rows(ORDERS, {1: b"a", 70: b"b"})
        dead_ts = sim.tso.next()
        sim.mvcc.prewrite([("put", primary, b"p"), ("put", secondary, b"s")], primary, dead_ts, 300)
        if primary_committed:
            sim.mvcc.commit([primary], dead_ts, sim.tso.next())
        tidb.rows(ORDERS, {2: b"c", 80: b"d"})
        wait_resolved(lake, {ORDERS: sim.tso.next()}, 0, runner)
        assert runner.runner._feed.locks_resolved() >= 1  # the feed's resolver unpinned it, nothing else
    assert runner.error is None

    lo, hi = table_record_span(ORDERS)
    assert [lk for lk in sim.mvcc.scan_locks(lo, hi, dead_ts) if lk.start_ts == dead_ts] == []
    mark = watermarks(lake).table_resolved[ORDERS]
    landed = [r for r in changelog(lake) if r[0] == ORDERS]
    # landing is at-least-once (docs/design.md invariant 5): a repeat is the same change again, never another
    assert len({(r[1], r[2]) for r in landed}) == len(set(landed))
    assert {r for r in landed if r[2] <= mark} == {r for r in oracle(sim, ORDERS, start) if r[2] <= mark}
    assert any(r[1] == secondary for r in landed) == primary_committed
