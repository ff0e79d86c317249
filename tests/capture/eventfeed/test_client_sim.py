"""The EventFeed client against the simulated cluster: real PD client, real ChangeData servers.

The table spans several regions; while transactions commit, regions split and merge, leaders
move, streams reset and stores report busy. The feed must deliver exactly the committed rows
(duplicates only with identical content), never a row at or below a table resolved ts already
reported, and never a table resolved ts at or above the start ts of a lock still held.
"""

import random
import threading
import time

import pytest

from tidelake.capture.eventfeed.client import EventFeedClient, FeedOptions
from tidelake.codec.keys import record_key, table_record_span_encoded, to_region_key
from tidelake.sim.cluster import SimCluster
from tidelake.upstream.pd_client import PDClient
from tidelake.wait import wait_until

TABLE = 90
HANDLES = 400


class CheckingSink:
    def __init__(self):
        self.cond = threading.Condition()
        self.rows = []
        self.table_ts = 0
        self.reports = []  # (monotonic time, ts)
        self.violations = []

    def on_rows(self, rows):
        with self.cond:
            for row in rows:
                if row.commit_ts <= self.table_ts:
                    self.violations.append(f"row {row.key.hex()}@{row.commit_ts} after resolved {self.table_ts}")
            self.rows.extend(rows)

    def on_resolved(self, table_id, span, ts):
        with self.cond:
            self.region_max_ts = max(getattr(self, "region_max_ts", 0), ts)

    def on_table_resolved(self, table_id, ts):
        with self.cond:
            if table_id != TABLE or ts <= self.table_ts:
                self.violations.append(f"table {table_id} resolved {ts} after {self.table_ts}")
            self.table_ts = ts
            self.reports.append((time.monotonic(), ts))
            self.cond.notify_all()

    def wait_resolved(self, ts, client, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self.table_ts < ts:
                assert client.error is None, client.error
                left = deadline - time.monotonic()
                assert left > 0, f"table resolved ts stuck at {self.table_ts} < {ts}"
                self.cond.wait(min(left, 0.2))


class Writer:
    """Percolator 2PC straight on the MVCC store: what got committed, and with which old value."""

    def __init__(self, cluster, seed):
        self.cluster = cluster
        self.rng = random.Random(seed)
        self.current = {}
        self.committed = {}  # (key, commit_ts) -> (op, value, old_value)

    def txn(self):
        handles = self.rng.sample(range(HANDLES), self.rng.randint(1, 4))
        keys = [record_key(TABLE, h) for h in handles]
        mutations = []
        for key in keys:
            if key in self.current and self.rng.random() < 0.25:
                mutations.append(("delete", key, b""))
            else:
                mutations.append(("put", key, self.rng.randbytes(self.rng.randint(1, 40))))
        tso, mvcc = self.cluster.tso, self.cluster.mvcc
        start_ts = tso.next()
        if self.rng.random() < 0.15:  # 1PC: realtime COMMITTED rows, no prewrite
            commit_ts = mvcc.commit_one_pc(mutations, start_ts, tso.next())
        else:
            mvcc.prewrite(mutations, keys[0], start_ts, 3000)
            if self.rng.random() < 0.1:
                mvcc.rollback(keys, start_ts)
                return
            commit_ts = tso.next()
            mvcc.commit(keys, start_ts, commit_ts)
        for op, key, value in mutations:
            self.committed[(key, commit_ts)] = (op, value, self.current.get(key, b""))
            if op == "put":
                self.current[key] = value
            else:
                self.current.pop(key, None)


def split_inside(cluster, handle):
    key = to_region_key(record_key(TABLE, handle))
    region = cluster.regions.locate(key)
    if region.start_key != key:
        cluster.regions.split(region.id, key)


def table_regions(cluster):
    start, end = table_record_span_encoded(TABLE)
    return cluster.regions.scan(start, end)


@pytest.fixture
def sim():
    with SimCluster(n_stores=3, seed=7, split_check_interval_s=0, cdc_options={"min_ts_interval_s": 0.2}) as cluster:
        yield cluster


def test_feed_delivers_exactly_the_committed_rows_through_region_churn(sim):
    sim.regions.split_table(TABLE)
    sim.regions.split_table(TABLE + 1)
    for handle in (100, 200, 300):
        split_inside(sim, handle)
    writer = Writer(sim, seed=3)
    for _ in range(20):
        writer.txn()  # history before the feed's start: must not be delivered
    start_ts = sim.tso.next()
    sim.faults.commit_before_prewrite = True
    sim.faults.duplicate_delivery = True

    pd = PDClient([sim.pd_address])
    sink = CheckingSink()
    options = FeedOptions(workers=3, backoff_base_s=0.02, backoff_cap_s=0.5)
    rng = random.Random(11)
    with EventFeedClient(pd, sink, options) as client:
        client.subscribe(TABLE, table_record_span_encoded(TABLE), start_ts)
        stores = sim.regions.store_ids()
        chaos = [
            lambda: split_inside(sim, rng.randrange(1, HANDLES)),
            lambda: (lambda r: sim.regions.transfer_leader(
                r.id, rng.choice([s for s in r.store_ids() if s != r.leader_store_id])))(
                rng.choice(table_regions(sim))),
            lambda: sim.faults.reset_streams(rng.choice(stores)),
            lambda: (lambda rs: len(rs) > 2 and sim.regions.merge(rs[1].id, rs[2].id))(table_regions(sim)),
            lambda: sim.faults.make_busy(rng.choice(stores), 200),
            lambda: sim.faults.congest(rng.choice(table_regions(sim)).id),
        ]
        for step in range(240):
            writer.txn()
            if step % 12 == 6:
                rng.choice(chaos)()
            time.sleep(0.005)

        # a lock held across several resolved-ts rounds pins the table's resolved ts below it,
        # while regions without locks resolve past it
        sink.wait_resolved(sim.tso.next(), client)
        lock_key = record_key(TABLE, HANDLES + 1)
        lock_ts = sim.tso.next()
        sim.mvcc.prewrite([("put", lock_key, b"held")], lock_key, lock_ts, 60_000)
        time.sleep(1.5)
        with sink.cond:
            assert sink.region_max_ts > lock_ts
            assert sink.table_ts <= lock_ts  # TiKV: resolved = min(lock start ts, min ts)
        commit_ts = sim.tso.next()
        sim.mvcc.commit([lock_key], lock_ts, commit_ts)
        writer.committed[(lock_key, commit_ts)] = ("put", b"held", b"")

        sink.wait_resolved(sim.tso.next(), client)
        assert client.error is None

    assert sink.violations == []
    received = {}
    for row in sink.rows:
        got = (row.op, row.value, row.old_value)
        previous = received.setdefault((row.key, row.commit_ts), got)
        assert previous == got, f"duplicate of {row.key.hex()}@{row.commit_ts} differs"
    expected = {k: v for k, v in writer.committed.items() if k[1] > start_ts}
    assert set(received) == set(expected)
    for k, (op, value, old_value) in expected.items():
        assert received[k][0] == op
        assert received[k][1] == (value if op == "put" else b"")
        assert received[k][2] == old_value
    assert len(table_regions(sim)) >= 3


def _check_exact(rows, committed, lower_ts, upper_ts=None):
    received = {}
    for row in rows:
        got = (row.op, row.value if row.op == "put" else b"", row.old_value)
        assert received.setdefault((row.key, row.commit_ts), got) == got
    expected = {k: (op, value if op == "put" else b"", old)
                for k, (op, value, old) in committed.items()
                if k[1] > lower_ts and (upper_ts is None or k[1] <= upper_ts)}
    in_window = {k: v for k, v in received.items() if upper_ts is None or k[1] <= upper_ts}
    assert in_window == expected


def test_store_down_and_restore_from_a_reported_resolved_ts_loses_nothing(sim):
    """Flink CDC lost rows restoring from a checkpoint (docs/peers.md#flink-cdc-tidb-connector): a second feed started
    from the first one's last table resolved ts must deliver every later commit, and the first
    feed must have delivered every commit up to it."""
    sim.regions.split_table(TABLE)
    sim.regions.split_table(TABLE + 1)
    for handle in (100, 200, 300):
        split_inside(sim, handle)
    writer = Writer(sim, seed=5)
    start_ts = sim.tso.next()
    pd = PDClient([sim.pd_address])
    options = FeedOptions(workers=2, backoff_base_s=0.02, backoff_cap_s=0.3)
    span = table_record_span_encoded(TABLE)

    first = CheckingSink()
    with EventFeedClient(pd, first, options) as client:
        client.subscribe(TABLE, span, start_ts)
        for step in range(60):
            writer.txn()
            if step == 20:
                sim.stop_store(table_regions(sim)[0].leader_store_id)  # stream breaks, leaders move
            if step == 40:
                sim.start_store([s for s in sim.regions.store_ids() if not sim.store_is_up(s)][0])
            time.sleep(0.01)
        first.wait_resolved(sim.tso.next(), client)
        checkpoint = first.table_ts
    assert first.violations == []
    _check_exact(first.rows, writer.committed, start_ts, checkpoint)

    for _ in range(30):  # written while no feed runs
        writer.txn()
    second = CheckingSink()
    with EventFeedClient(pd, second, options) as client:
        client.subscribe(TABLE, span, checkpoint)
        for _ in range(30):
            writer.txn()
        second.wait_resolved(sim.tso.next(), client)
    assert second.violations == []
    _check_exact(second.rows, writer.committed, checkpoint)


def test_a_store_stream_without_regions_is_closed_and_reopened_on_demand(sim):
    """TiCDC closes a stream idle for 60 s (docs/wire.md#stream-setup); here after 0.5 s."""
    split_inside(sim, HANDLES // 2)
    writer = Writer(sim, seed=3)
    sink = CheckingSink()
    options = FeedOptions(idle_stream_s=0.5, idle_check_s=0.1)
    with PDClient([sim.pd_address]) as pd, EventFeedClient(pd, sink, options) as client:
        first = client.subscribe(TABLE, table_record_span_encoded(TABLE), sim.tso.next())
        sink.wait_resolved(sim.tso.next(), client)
        leaders = {r.leader_store_id for r in table_regions(sim)}
        assert client.stream_count() == len(leaders)
        client.unsubscribe(first)
        deadline = time.monotonic() + 10
        while client.stream_count() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.stream_count() == 0
        start = sim.tso.next()
        for _ in range(5):
            writer.txn()
        client.subscribe(TABLE, table_record_span_encoded(TABLE), start)
        sink.wait_resolved(sim.tso.next(), client)
        assert client.stream_count() == len(leaders)
    assert not sink.violations
    landed = {(r.key, r.commit_ts) for r in sink.rows}
    assert set(writer.committed) <= landed


def test_every_prewrite_spilled_still_delivers_exactly_the_committed_rows(sim, tmp_path):
    """prewrite_memory_bytes=0: every prewrite of every region goes to the spill file and comes
    back for its commit, from several workers at once; a transaction held open shows in the
    usage, and close() leaves no file behind."""
    for handle in (100, 200, 300):
        split_inside(sim, handle)
    writer = Writer(sim, seed=9)
    start_ts = sim.tso.next()
    sink = CheckingSink()
    options = FeedOptions(workers=4, backoff_base_s=0.02, backoff_cap_s=0.3, prewrite_memory_bytes=0,
                          spill_dir=str(tmp_path))
    with PDClient([sim.pd_address]) as pd:
        client = EventFeedClient(pd, sink, options).start()
        client.subscribe(TABLE, table_record_span_encoded(TABLE), start_ts)
        for _ in range(60):
            writer.txn()
        # one transaction over every region, held open across resolved-ts rounds
        big = [("put", record_key(TABLE, h), bytes([h % 251]) * 30) for h in range(0, HANDLES, 2)]
        keys = [key for _, key, _ in big]
        big_ts = sim.tso.next()
        sim.mvcc.prewrite(big, keys[0], big_ts, 60_000)
        wait_until(lambda: client.prewrite_usage()[1] >= len(big), 20, "the big transaction's prewrites spilled")
        assert client.prewrite_usage()[0] == 0  # nothing in memory
        commit_ts = sim.tso.next()
        sim.mvcc.commit(keys, big_ts, commit_ts)
        for _, key, value in big:
            writer.committed[(key, commit_ts)] = ("put", value, writer.current.get(key, b""))
            writer.current[key] = value
        for _ in range(60):
            writer.txn()
        sink.wait_resolved(sim.tso.next(), client)
        assert client.prewrite_usage() == (0, 0)
        client.close()
        assert client.error is None
    assert sink.violations == []
    _check_exact(sink.rows, writer.committed, start_ts)
    assert list(tmp_path.iterdir()) == []
