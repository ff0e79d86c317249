"""TiDB's transaction protocol on the simulated stores, through real gRPC stubs (docs/wire.md#transactional-writes).

The apply stream (what CDC reports) is observed directly: prewrites and commits as TiKV reports
them, 1PC as committed rows, pessimistic locks never.
"""

from __future__ import annotations

import pytest
from test_kv_service import channels, ctx, row, table_region  # noqa: F401  (fixtures)

from tidelake.kvproto import kvrpcpb_pb2
from tidelake.tso import compose, physical_ms

Mutation = kvrpcpb_pb2.Mutation
PESSIMISTIC = kvrpcpb_pb2.PrewriteRequest.DO_PESSIMISTIC_CHECK


@pytest.fixture
def applied(sim_cluster):
    seen: list[tuple[str, list]] = []
    observer = lambda batch: seen.append((batch.kind, [(e.key, e.op, e.commit_ts) for e in batch.entries]))  # noqa: E731
    sim_cluster.mvcc.add_observer(observer)
    yield seen
    sim_cluster.mvcc.remove_observer(observer)


def put(handle: int, value: bytes) -> Mutation:
    return Mutation(op=kvrpcpb_pb2.Put, key=row(handle), value=value)


def test_async_commit_prewrite_lands_above_max_ts_and_resolves_by_secondaries(sim_cluster, channels, table_region,
                                                                            applied):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    read_ts = sim_cluster.tso.next()
    kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(9), version=read_ts))  # raises max_ts
    resp = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(1, b"p"), put(2, b"s")], primary_lock=row(1), start_version=start,
        lock_ttl=1, use_async_commit=True, secondaries=[row(2)], min_commit_ts=start + 1))
    assert not resp.errors and resp.min_commit_ts > read_ts  # a read at read_ts can never miss this txn
    assert applied == [("prewrite", [(row(1), "put", 0), (row(2), "put", 0)])]
    late = compose(physical_ms(start) + 60_000, 0)  # long after the 1 ms TTL
    status = kv.KvCheckTxnStatus(kvrpcpb_pb2.CheckTxnStatusRequest(
        context=ctx(table_region), primary_key=row(1), lock_ts=start, caller_start_ts=late, current_ts=late,
        rollback_if_not_exist=True))
    assert status.lock_ttl > 0 and status.lock_info.use_async_commit  # never rolled back by TTL
    assert list(status.lock_info.secondaries) == [row(2)]
    secondary = kv.KvCheckSecondaryLocks(kvrpcpb_pb2.CheckSecondaryLocksRequest(
        context=ctx(table_region), keys=[row(2)], start_version=start))
    assert [lk.min_commit_ts for lk in secondary.locks] == [resp.min_commit_ts] and secondary.commit_ts == 0
    commit = kv.KvCommit(kvrpcpb_pb2.CommitRequest(context=ctx(table_region), start_version=start,
                                                   keys=[row(1), row(2)], commit_version=resp.min_commit_ts))
    assert not commit.HasField("error")
    assert applied[-1] == ("commit", [(row(1), "put", resp.min_commit_ts), (row(2), "put", resp.min_commit_ts)])


def test_check_secondary_locks_rolls_back_a_missing_lock_for_good(sim_cluster, channels, table_region):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    got = kv.KvCheckSecondaryLocks(kvrpcpb_pb2.CheckSecondaryLocksRequest(
        context=ctx(table_region), keys=[row(3)], start_version=start))
    assert (list(got.locks), got.commit_ts) == ([], 0)
    late = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(3, b"x")], primary_lock=row(3), start_version=start, lock_ttl=3000))
    assert late.errors[0].conflict.reason == kvrpcpb_pb2.WriteConflict.SelfRolledBack


def test_one_pc_commits_without_a_lock_as_committed_rows(sim_cluster, channels, table_region, applied):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    resp = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(4, b"a"), put(5, b"b")], primary_lock=row(4), start_version=start,
        lock_ttl=3000, try_one_pc=True))
    assert resp.one_pc_commit_ts > start and resp.min_commit_ts == 0
    assert applied == [("one_pc", [(row(4), "put", resp.one_pc_commit_ts), (row(5), "put", resp.one_pc_commit_ts)])]
    assert not sim_cluster.mvcc.scan_locks(b"", b"", 2**64 - 1)
    got = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(5), version=resp.one_pc_commit_ts))
    assert got.value == b"b"


def test_one_pc_above_max_commit_ts_falls_back_to_two_phase(sim_cluster, channels, table_region):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    resp = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(6, b"a")], primary_lock=row(6), start_version=start,
        lock_ttl=3000, try_one_pc=True, max_commit_ts=start))
    assert (resp.one_pc_commit_ts, len(sim_cluster.mvcc.scan_locks(b"", b"", 2**64 - 1))) == (0, 1)


def test_pessimistic_txn_locks_invisibly_conflicts_and_commits(sim_cluster, channels, table_region, applied):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    for_update = sim_cluster.tso.next()
    lock = kv.KvPessimisticLock(kvrpcpb_pb2.PessimisticLockRequest(
        context=ctx(table_region), mutations=[Mutation(op=kvrpcpb_pb2.PessimisticLock, key=row(7))],
        primary_lock=row(7), start_version=start, for_update_ts=for_update, lock_ttl=3000, return_values=True))
    assert not lock.errors and list(lock.not_founds) == [True]
    assert applied == []  # pessimistic locks never reach CDC
    reader = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(7), version=sim_cluster.tso.next()))
    assert reader.not_found and not reader.HasField("error")  # nor do they block reads
    other = sim_cluster.tso.next()
    blocked = kv.KvPessimisticLock(kvrpcpb_pb2.PessimisticLockRequest(
        context=ctx(table_region), mutations=[Mutation(op=kvrpcpb_pb2.PessimisticLock, key=row(7))],
        primary_lock=row(7), start_version=other, for_update_ts=other, lock_ttl=3000))
    assert blocked.errors[0].locked.lock_type == kvrpcpb_pb2.PessimisticLock
    pre = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(7, b"v")], primary_lock=row(7), start_version=start,
        for_update_ts=for_update, pessimistic_actions=[PESSIMISTIC], lock_ttl=3000))
    assert not pre.errors and applied == [("prewrite", [(row(7), "put", 0)])]
    commit_ts = sim_cluster.tso.next()
    kv.KvCommit(kvrpcpb_pb2.CommitRequest(context=ctx(table_region), start_version=start, keys=[row(7)],
                                          commit_version=commit_ts))
    stale = kv.KvPessimisticLock(kvrpcpb_pb2.PessimisticLockRequest(
        context=ctx(table_region), mutations=[Mutation(op=kvrpcpb_pb2.PessimisticLock, key=row(7))],
        primary_lock=row(7), start_version=other, for_update_ts=other, lock_ttl=3000))
    assert stale.errors[0].conflict.reason == kvrpcpb_pb2.WriteConflict.PessimisticRetry


def test_prewrite_without_the_pessimistic_lock_fails(sim_cluster, channels, table_region):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    pre = kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(8, b"v")], primary_lock=row(8), start_version=start,
        for_update_ts=start, pessimistic_actions=[PESSIMISTIC], lock_ttl=3000))
    assert "PessimisticLockNotFound" in pre.errors[0].abort


def test_pessimistic_rollback_heartbeat_cleanup_and_batch_rollback(sim_cluster, channels, table_region, applied):
    kv = channels(table_region.leader_store_id)
    start = sim_cluster.tso.next()
    kv.KvPessimisticLock(kvrpcpb_pb2.PessimisticLockRequest(
        context=ctx(table_region), mutations=[Mutation(op=kvrpcpb_pb2.PessimisticLock, key=row(10))],
        primary_lock=row(10), start_version=start, for_update_ts=start, lock_ttl=3000))
    kv.KVPessimisticRollback(kvrpcpb_pb2.PessimisticRollbackRequest(
        context=ctx(table_region), start_version=start, for_update_ts=start, keys=[row(10)]))
    assert not sim_cluster.mvcc.scan_locks(b"", b"", 2**64 - 1) and applied == []
    kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(11, b"v")], primary_lock=row(11), start_version=start,
        lock_ttl=100))
    beat = kv.KvTxnHeartBeat(kvrpcpb_pb2.TxnHeartBeatRequest(
        context=ctx(table_region), primary_lock=row(11), start_version=start, advise_lock_ttl=5000))
    assert beat.lock_ttl == 5000
    alive = kv.KvCleanup(kvrpcpb_pb2.CleanupRequest(context=ctx(table_region), key=row(11), start_version=start,
                                                    current_ts=sim_cluster.tso.next()))
    assert alive.error.locked.lock_version == start
    assert not kv.KvCleanup(kvrpcpb_pb2.CleanupRequest(context=ctx(table_region), key=row(11),
                                                       start_version=start)).HasField("error")
    assert applied[-1] == ("rollback", [(row(11), "rollback", 0)])
    other = sim_cluster.tso.next()
    kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
        context=ctx(table_region), mutations=[put(12, b"v")], primary_lock=row(12), start_version=other,
        lock_ttl=3000))
    commit_ts = sim_cluster.tso.next()
    kv.KvCommit(kvrpcpb_pb2.CommitRequest(context=ctx(table_region), start_version=other, keys=[row(12)],
                                          commit_version=commit_ts))
    done = kv.KvCleanup(kvrpcpb_pb2.CleanupRequest(context=ctx(table_region), key=row(12), start_version=other))
    assert done.commit_version == commit_ts
    assert kv.KvBatchRollback(kvrpcpb_pb2.BatchRollbackRequest(
        context=ctx(table_region), start_version=other, keys=[row(12)])).error.abort


def test_keys_that_held_only_a_pessimistic_lock_are_listed_once(sim_cluster, channels, table_region):
    """A pessimistic lock on a new key, then a 1PC / 2PC write or a pessimistic rollback then a write."""
    kv = channels(table_region.leader_store_id)

    def lock(handle: int, start: int) -> None:
        kv.KvPessimisticLock(kvrpcpb_pb2.PessimisticLockRequest(
            context=ctx(table_region), mutations=[Mutation(op=kvrpcpb_pb2.PessimisticLock, key=row(handle))],
            primary_lock=row(handle), start_version=start, for_update_ts=start, lock_ttl=3000))

    def prewrite(handle: int, start: int, **extra) -> kvrpcpb_pb2.PrewriteResponse:
        return kv.KvPrewrite(kvrpcpb_pb2.PrewriteRequest(
            context=ctx(table_region), mutations=[put(handle, b"v")], primary_lock=row(handle), start_version=start,
            lock_ttl=3000, **extra))

    start = sim_cluster.tso.next()
    lock(20, start)
    prewrite(20, start, for_update_ts=start, pessimistic_actions=[PESSIMISTIC], try_one_pc=True)
    start = sim_cluster.tso.next()
    lock(21, start)
    prewrite(21, start, for_update_ts=start, pessimistic_actions=[PESSIMISTIC])
    kv.KvCommit(kvrpcpb_pb2.CommitRequest(context=ctx(table_region), start_version=start, keys=[row(21)],
                                          commit_version=sim_cluster.tso.next()))
    start = sim_cluster.tso.next()
    lock(22, start)
    kv.KVPessimisticRollback(kvrpcpb_pb2.PessimisticRollbackRequest(
        context=ctx(table_region), start_version=start, for_update_ts=start, keys=[row(22)]))
    other = sim_cluster.tso.next()
    prewrite(22, other, try_one_pc=True)
    scan = kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=10,
                                             version=sim_cluster.tso.next()))
    assert [p.key for p in scan.pairs] == [row(20), row(21), row(22)]
