"""Stale-lock resolution on the simulator (docs/wire.md#stale-locks-on-lagging-regions).

A transaction prewrites a primary and a secondary in another region, then its client dies. Its
locks pin the table's resolved ts for good; a feed that resolves locks on lagging regions moves
past them, having rolled the transaction back (primary never committed) or committed its
secondary (primary committed, or an async-commit txn decided by its secondaries), and delivers exactly the sim's MVCC write records.
"""

import threading
import time

import pytest

from tidelake import tso
from tidelake.capture.eventfeed.client import EventFeedClient, FeedOptions
from tidelake.capture.eventfeed.stale_locks import RegionLockResolver
from tidelake.codec.keys import record_key, table_record_span, table_record_span_encoded, to_region_key
from tidelake.sim.cluster import SimCluster
from tidelake.upstream.pd_client import PDClient

TABLE = 91
TTL_MS = 300
FAST = FeedOptions(workers=2, backoff_base_s=0.02, backoff_cap_s=0.5, resolve_lock_lag_s=0.3,
                   resolve_lock_tick_s=0.1, resolve_lock_min_interval_s=0.5)


class Sink:
    def __init__(self):
        self.cond = threading.Condition()
        self.rows = []
        self.table_ts = 0

    def on_rows(self, rows):
        with self.cond:
            self.rows.extend(rows)

    def on_resolved(self, table_id, span, ts):
        pass

    def on_table_resolved(self, table_id, ts):
        with self.cond:
            self.table_ts = ts
            self.cond.notify_all()

    def wait(self, until, client, timeout_s=20.0):
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not until():
                assert client.error is None, client.error
                left = deadline - time.monotonic()
                assert left > 0, f"table resolved ts stuck at {self.table_ts}"
                self.cond.wait(min(left, 0.2))


@pytest.fixture
def sim():
    with SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0,
                    cdc_options={"min_ts_interval_s": 0.1}) as cluster:
        cluster.regions.split_table(TABLE)
        cluster.regions.split_table(TABLE + 1)
        for handle in (50, 100):
            key = to_region_key(record_key(TABLE, handle))
            cluster.regions.split(cluster.regions.locate(key).id, key)
        yield cluster


def commit(sim, *handles):
    start_ts = sim.tso.next()
    keys = [record_key(TABLE, h) for h in handles]
    sim.mvcc.prewrite([("put", k, b"v%d" % start_ts) for k in keys], keys[0], start_ts, 3000)
    sim.mvcc.commit(keys, start_ts, sim.tso.next())


def locks_of(sim, start_ts):
    lo, hi = table_record_span(TABLE)
    return [lk for lk in sim.mvcc.scan_locks(lo, hi, start_ts) if lk.start_ts == start_ts]


def delivered(sink, upto):
    return {(r.key, r.commit_ts, r.op, r.value if r.op == "put" else b"") for r in sink.rows if r.commit_ts <= upto}


def oracle(sim, after_ts, upto):
    lo, hi = table_record_span(TABLE)
    return {(e.key, e.commit_ts, e.op, e.value if e.op == "put" else b"")
            for e in sim.mvcc.snapshot_delta(lo, hi, after_ts) if after_ts < e.commit_ts <= upto}


@pytest.mark.parametrize("fate", ["rolled_back", "primary_committed", "async_commit"])
def test_dead_client_lock_pins_the_table_until_resolved(sim, fate):
    """async_commit: every key prewritten, so CheckSecondaryLocks finds all locked and commits it."""
    start_ts = sim.tso.next()
    commit(sim, 1, 70, 120)
    primary, secondary = record_key(TABLE, 10), record_key(TABLE, 60)  # regions [.., 50) and [50, 100)
    dead_ts = sim.tso.next()
    sim.mvcc.prewrite([("put", primary, b"p"), ("put", secondary, b"s")], primary, dead_ts, TTL_MS,
                      use_async_commit=fate == "async_commit", secondaries=(secondary,))
    if fate == "primary_committed":
        sim.mvcc.commit([primary], dead_ts, sim.tso.next())
    commit(sim, 2, 80, 130)
    span = table_record_span_encoded(TABLE)

    with PDClient([sim.pd_address]) as pd:
        # without the resolver the lock holds the table's resolved ts, past its TTL
        sink = Sink()
        with EventFeedClient(pd, sink, FAST) as client:
            client.subscribe(TABLE, span, start_ts)
            sink.wait(lambda: sink.table_ts > start_ts and tso.physical_ms(sim.tso.next())
                      > tso.physical_ms(dead_ts) + 3 * TTL_MS, client)
            time.sleep(0.3)
            assert sink.table_ts <= dead_ts  # TiKV: resolved ts = min(lock start ts, TSO)
        assert len(locks_of(sim, dead_ts)) == (1 if fate == "primary_committed" else 2)

        sink = Sink()
        with EventFeedClient(pd, sink, FAST, lock_resolver=RegionLockResolver(pd)) as client:
            client.subscribe(TABLE, span, start_ts)
            target = sim.tso.next()
            sink.wait(lambda: sink.table_ts >= target, client)
            assert client.locks_resolved() >= 1
            mark = sink.table_ts

    assert locks_of(sim, dead_ts) == []
    committed = fate != "rolled_back"
    now = sim.tso.next()
    assert sim.mvcc.get(secondary, now) == (b"s" if committed else None)
    assert sim.mvcc.get(primary, now) == (b"p" if committed else None)
    got = delivered(sink, mark)
    assert got == oracle(sim, start_ts, mark)
    assert any(key == secondary for key, *_ in got) == committed


def test_a_live_lock_is_left_alone(sim):
    key = record_key(TABLE, 60)
    live_ts = sim.tso.next()
    sim.mvcc.prewrite([("put", key, b"x")], key, live_ts, 60_000)
    with PDClient([sim.pd_address]) as pd:
        resolver = RegionLockResolver(pd)
        try:
            found, alive = resolver.resolve(table_record_span_encoded(TABLE), sim.tso.next())
        finally:
            resolver.close()
    assert (found, alive) == (1, 1)
    assert len(locks_of(sim, live_ts)) == 1


class SpyResolver:
    def __init__(self, real):
        self.real = real
        self.spans = []

    def current_ts(self):
        return self.real.current_ts()

    def resolve(self, span, max_version, cancel=None):
        self.spans.append(span)
        return 0, 0

    def close(self):
        self.real.close()


def test_a_tick_is_bounded_and_a_region_waits_its_interval(sim):
    keys = [record_key(TABLE, h) for h in (10, 60, 120)]  # one live lock in each of the three regions
    held_ts = sim.tso.next()
    sim.mvcc.prewrite([("put", k, b"x") for k in keys], keys[0], held_ts, 60_000)
    options = FeedOptions(workers=2, resolve_lock_lag_s=0.2, resolve_lock_tick_s=3600, resolve_lock_regions=2,
                          resolve_lock_min_interval_s=3600)
    with PDClient([sim.pd_address]) as pd:
        spy = SpyResolver(RegionLockResolver(pd))
        sink = Sink()
        with EventFeedClient(pd, sink, options, lock_resolver=spy) as client:
            sub_id = client.subscribe(TABLE, table_record_span_encoded(TABLE), held_ts - 1)
            sink.wait(lambda: sink.table_ts >= held_ts - 1 and client.region_count(sub_id) == 3
                      and tso.physical_ms(sim.tso.next()) > tso.physical_ms(held_ts) + 400, client)
            client._resolve_lagging_regions(spy)  # one tick, run here (the timer's is an hour away)
            assert len(spy.spans) == 2  # resolve_lock_regions a tick
            client._resolve_lagging_regions(spy)
            assert len(spy.spans) == 3 and len(set(spy.spans)) == 3  # the third region; the others wait
            client._resolve_lagging_regions(spy)
            assert len(spy.spans) == 3
