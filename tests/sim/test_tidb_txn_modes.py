"""The front's transactions in TiDB's default mode (pessimistic, async commit, 1PC) and the optimistic
one, seen through the store's real CDC stream (docs/wire.md#the-simulators-own-front-tidbs-transaction-modes).

What TiKV reports is the oracle: 1PC as COMMITTED rows and nothing else, async commit as PREWRITE
rows then COMMIT rows at the prewrite's min_commit_ts, pessimistic locks never (and they do not
hold resolved ts back), a pessimistic rollback nothing at all.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from cdc_harness import Stream, has_initialized, has_resolved, register_request, rows

from tidelake.codec.keys import record_key, table_record_span
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.kvtxn import (
    ASYNC_COMMIT,
    ASYNC_COMMIT_KEYS_LIMIT,
    ONE_PC,
    TWO_PC,
    KvTxn,
    TxnConflictError,
)
from tidelake.sim.tidb.session import SimTiDB
from tidelake.wait import wait_until

T = cdcpb_pb2.Event.LogType


@pytest.fixture
def shop():
    cluster = SimCluster(n_stores=1, split_check_interval_s=0, gc_interval_s=0, server_workers=8,
                         cdc_options={"min_ts_interval_s": 0.1})
    with cluster:
        tidb = SimTiDB(cluster)
        tidb.create_database("shop")
        for name in ("a", "b"):
            tidb.create_table("shop", name, [("id", "bigint", "pk"), ("v", "varchar(300)")])
        tidb.create_table("shop", "n", [("id", "bigint", "pk"), ("bal", "bigint")])
        yield tidb


def table_id(tidb: SimTiDB, name: str) -> int:
    return tidb.table_info("shop", name).id


def watch(tidb: SimTiDB, *names: str) -> list[Stream]:
    """An initialized EventFeed stream per table region (one store leads everything)."""
    streams = []
    for name in names:
        region = tidb.cluster.regions.locate(encode_bytes(record_key(table_id(tidb, name), 0)))
        stream = Stream(tidb.cluster.store_addresses[1])
        stream.send(register_request(region, tidb.cluster.tso.next(), cluster_id=tidb.cluster.cluster_id))
        stream.collect_until(has_initialized)
        streams.append(stream)
    return streams


def seen(stream: Stream, until_ts: int) -> list[tuple]:
    """(type, key, start ts, commit ts) of the rows sent before a resolved ts >= until_ts."""
    return [(r.type, r.key, r.start_ts, r.commit_ts) for r in rows(stream.collect_until(
        lambda m: has_resolved(m, until_ts), timeout=10))]


def test_a_one_region_txn_is_one_pc_committed_rows_only(shop):
    (stream,) = watch(shop, "a")
    with shop.txn() as t:
        t.insert("shop", "a", {"id": 1, "v": "x"})
        t.insert("shop", "a", {"id": 2, "v": "y"})
    assert (t.mode, t.protocol) == ("pessimistic", ONE_PC)
    keys = [record_key(table_id(shop, "a"), h) for h in (1, 2)]
    assert sorted(seen(stream, t.commit_ts)) == [(T.COMMITTED, k, t.start_ts, t.commit_ts) for k in keys]
    assert shop.select_all("shop", "a") == [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]


def test_a_two_region_txn_is_async_commit_at_its_min_commit_ts(shop):
    a, b = watch(shop, "a", "b")
    read_ts = shop.cluster.tso.next()
    shop.select_all("shop", "b", read_ts)  # a reader at read_ts: the commit must land above it
    mvcc = shop.cluster.mvcc
    locks = {}

    def on_prewrite(batch) -> None:  # the data locks as the prewrite left them
        if batch.kind == "prewrite":
            locks.update({lk.key: lk for lk in mvcc.scan_locks(b"", b"", 2**64 - 1)})

    mvcc.add_observer(on_prewrite)
    with shop.txn() as txn:
        txn.insert("shop", "a", {"id": 1, "v": "x"})
        txn.insert("shop", "b", {"id": 1, "v": "y"})
    mvcc.remove_observer(on_prewrite)
    ka, kb = record_key(table_id(shop, "a"), 1), record_key(table_id(shop, "b"), 1)
    assert set(locks) == {ka, kb} and all(lk.use_async_commit and lk.op == "put" for lk in locks.values())
    assert locks[ka].secondaries == (kb,) and locks[kb].secondaries == ()  # the primary lists them
    assert locks[ka].for_update_ts > txn.start_ts  # pessimistic locks turned into data locks
    assert txn.protocol == ASYNC_COMMIT and txn.commit_ts > read_ts
    assert txn.commit_ts == max(lk.min_commit_ts for lk in locks.values())
    for stream, key in ((a, ka), (b, kb)):
        assert seen(stream, txn.commit_ts) == [(T.PREWRITE, key, txn.start_ts, 0),
                                                (T.COMMIT, key, txn.start_ts, txn.commit_ts)]


def test_pessimistic_locks_are_never_emitted_and_do_not_hold_resolved_ts(shop):
    with shop.txn() as t:
        t.insert("shop", "a", {"id": 1, "v": "x"})
    (stream,) = watch(shop, "a")
    txn = shop.txn()
    assert txn.update("shop", "a", {"id": 1}, {"v": "locked"})
    (lock,) = shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1)
    assert lock.op == "pessimistic"
    later = shop.cluster.tso.next()
    assert seen(stream, later) == []  # resolved ts passed the holder's start ts; no row was sent
    txn.rollback()  # KVPessimisticRollback: no lock, no write record, no CDC row
    assert shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1) == []
    start, end = table_record_span(table_id(shop, "a"))
    assert [e.commit_ts for e in shop.cluster.mvcc.snapshot_delta(start, end, 0)] == [t.commit_ts]
    assert seen(stream, shop.cluster.tso.next()) == []


def test_a_txn_that_holds_its_locks_is_classic_two_phase(shop):
    txn = shop.txn(lock_ttl_ms=60_000)
    txn.insert("shop", "a", {"id": 1, "v": "x"})
    txn.prewrite()
    (lock,) = shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1)
    assert lock.op == "put" and not lock.use_async_commit and lock.for_update_ts > txn.start_ts
    ts = shop.cluster.tso.next()
    assert shop.select_all("shop", "a", ts) == []  # a reader pushes its min_commit_ts, no wait
    txn.commit()
    assert txn.protocol == TWO_PC and txn.commit_ts > ts


def test_client_go_limits_choose_the_protocol(shop):
    """Async commit up to 256 keys / 4 KiB of keys; 1PC for one region in one 16 KiB batch."""
    with shop.txn() as t:  # one region, 300 small rows: 1PC (no key limit applies to it)
        for i in range(300):
            t.insert("shop", "a", {"id": i, "v": "s"})
    assert t.protocol == ONE_PC
    with shop.txn() as t:  # one region but 40 KiB: two batches, so async commit
        for i in range(1000, 1130):
            t.insert("shop", "a", {"id": i, "v": "x" * 300})
    assert t.protocol == ASYNC_COMMIT
    with shop.txn() as t:  # two regions and more keys than async commit takes: 2PC
        for i in range(2000, 2000 + ASYNC_COMMIT_KEYS_LIMIT):
            t.insert("shop", "a", {"id": i, "v": "s"})
        t.insert("shop", "b", {"id": 1, "v": "s"})
    assert t.protocol == TWO_PC
    with shop.txn(mode="optimistic") as t:  # the classic mode never uses either
        t.insert("shop", "a", {"id": 9999, "v": "s"})
    assert (t.mode, t.protocol) == ("optimistic", TWO_PC)


def test_optimistic_txn_is_prewrite_then_commit_at_a_fresh_tso(shop):
    (stream,) = watch(shop, "a")
    with shop.txn(mode="optimistic") as t:
        t.insert("shop", "a", {"id": 1, "v": "x"})
    key = record_key(table_id(shop, "a"), 1)
    assert seen(stream, t.commit_ts) == [(T.PREWRITE, key, t.start_ts, 0), (T.COMMIT, key, t.start_ts, t.commit_ts)]


def test_a_pessimistic_writer_waits_for_the_lock_and_reads_the_latest_value(shop):
    """No lost update: the second transfer locks after the first committed and adds to its result."""
    with shop.txn() as t:
        t.insert("shop", "n", {"id": 1, "bal": 0})
    first = shop.txn()
    assert first.add("shop", "n", {"id": 1}, {"bal": 1})
    done = threading.Event()
    waiter = shop.txn()

    def second() -> None:
        with waiter as t:
            t.add("shop", "n", {"id": 1}, {"bal": 10})  # waits on first's pessimistic lock
        done.set()

    thread = threading.Thread(target=second)
    thread.start()
    wait_until(lambda: shop.cluster.lock_waits.waiting(waiter.start_ts), 10, "second waiting for first's lock")
    assert not done.is_set()
    first.commit()
    thread.join(20)
    assert done.is_set()
    assert shop.select_all("shop", "n") == [{"id": 1, "bal": 11}]


def test_an_optimistic_txn_still_conflicts_with_a_pessimistic_one(shop):
    with shop.txn() as t:
        t.insert("shop", "a", {"id": 1, "v": "0"})
    optimistic = shop.txn(mode="optimistic")
    optimistic.update("shop", "a", {"id": 1}, {"v": "o"})
    with shop.txn() as t:
        t.update("shop", "a", {"id": 1}, {"v": "p"})
    with pytest.raises(TxnConflictError):
        optimistic.commit()
    assert [r["v"] for r in shop.select_all("shop", "a")] == ["p"]
    assert shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1) == []


def test_unknown_mode_is_an_input_error(shop):
    from tidelake.errors import InputError

    with pytest.raises(InputError, match="unknown transaction mode 'serializable'"):
        KvTxn(shop.cluster, mode="serializable")
    with pytest.raises(InputError, match="txn_mode"):
        SimTiDB(shop.cluster, txn_mode="nope")


def test_a_deadlock_is_refused_to_the_txn_that_would_close_the_cycle(shop):
    with shop.txn() as t:
        t.insert("shop", "n", {"id": 1, "bal": 0})
        t.insert("shop", "n", {"id": 2, "bal": 0})
    first, second = shop.txn(), shop.txn()
    first.add("shop", "n", {"id": 1}, {"bal": 1})
    second.add("shop", "n", {"id": 2}, {"bal": 10})
    outcome: list[str] = []

    def first_wants_2() -> None:
        first.add("shop", "n", {"id": 2}, {"bal": 1})  # waits for second
        first.commit()
        outcome.append("first committed")

    thread = threading.Thread(target=first_wants_2)
    thread.start()
    wait_until(lambda: shop.cluster.lock_waits.waiting(first.start_ts), 10, "first waiting for second's lock")
    with pytest.raises(TxnConflictError, match="deadlock"):
        second.add("shop", "n", {"id": 1}, {"bal": 10})  # would wait for first: a cycle
    thread.join(20)
    assert outcome == ["first committed"]
    assert sorted((r["id"], r["bal"]) for r in shop.select_all("shop", "n")) == [(1, 1), (2, 1)]
    assert shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1) == []


def test_concurrent_pessimistic_transfers_lose_no_update(shop):
    """Threads move money between random accounts; every committed transfer is in the final
    balances exactly once and the total never changes (deadlocks are refused, never stalled)."""
    accounts = 6
    with shop.txn() as t:
        for i in range(accounts):
            t.insert("shop", "n", {"id": i, "bal": 100})
    committed: list[tuple[int, int, int]] = []
    refused = []

    def transfers(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(25):
            src, dst = rng.sample(range(accounts), 2)
            amount = rng.randint(1, 9)
            try:
                with shop.txn() as t:
                    t.add("shop", "n", {"id": src}, {"bal": -amount})
                    t.add("shop", "n", {"id": dst}, {"bal": amount})
            except TxnConflictError as err:
                refused.append(str(err))
                continue
            committed.append((src, dst, amount))

    threads = [threading.Thread(target=transfers, args=(seed,)) for seed in range(3)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert time.monotonic() - started < 30  # no deadlock waited out a lock TTL
    expected = {i: 100 for i in range(accounts)}
    for src, dst, amount in committed:
        expected[src] -= amount
        expected[dst] += amount
    assert {r["id"]: r["bal"] for r in shop.select_all("shop", "n")} == expected
    assert len(committed) + len(refused) == 75 and len(committed) > 50
    assert all("deadlock" in reason for reason in refused), refused
    assert shop.cluster.mvcc.scan_locks(b"", b"", 2**64 - 1) == []
