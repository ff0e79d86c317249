"""The simulated TiKV read servicer through real gRPC stubs (docs/metadata.md#kvrpcpbcontext, docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader)."""

from __future__ import annotations

import time

import grpc
import pytest

from tidelake.codec.keys import record_key, table_split_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import kvrpcpb_pb2, metapb_pb2, tikvpb_pb2_grpc
from tidelake.sim.regions import SimRegion
from tidelake.tso import compose, physical_ms

TABLE = 100


def row(handle: int) -> bytes:
    return record_key(TABLE, handle)


@pytest.fixture
def channels(sim_cluster):
    opened: dict[int, grpc.Channel] = {}

    def stub(store_id: int) -> tikvpb_pb2_grpc.TikvStub:
        if store_id not in opened:
            opened[store_id] = grpc.insecure_channel(sim_cluster.store_addresses[store_id])
        return tikvpb_pb2_grpc.TikvStub(opened[store_id])

    yield stub
    for ch in opened.values():
        ch.close()


def ctx(region: SimRegion, store_id: int | None = None, **extra) -> kvrpcpb_pb2.Context:
    store_id = region.leader_store_id if store_id is None else store_id
    peer = region.peer_on(store_id) or metapb_pb2.Peer(id=0, store_id=store_id)
    return kvrpcpb_pb2.Context(region_id=region.id, peer=peer,
                               region_epoch=metapb_pb2.RegionEpoch(conf_ver=region.conf_ver, version=region.version),
                               **extra)


def commit_rows(cluster, rows: dict[int, bytes]) -> int:
    start = cluster.tso.next()
    keys = [row(h) for h in rows]
    cluster.mvcc.prewrite([("put", row(h), v) for h, v in rows.items()], keys[0], start, 3000)
    commit = cluster.tso.next()
    cluster.mvcc.commit(keys, start, commit)
    return commit


@pytest.fixture
def table_region(sim_cluster):
    sim_cluster.split_table(TABLE)
    sim_cluster.split_table(TABLE + 1)
    return sim_cluster.regions.locate(table_split_key(TABLE))


def test_get_scan_batch_get(sim_cluster, channels, table_region):
    ts = commit_rows(sim_cluster, {1: b"a", 2: b"b", 3: b"c"})
    kv = channels(table_region.leader_store_id)
    got = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(2), version=ts, need_commit_ts=True))
    assert (got.value, got.not_found, got.commit_ts) == (b"b", False, ts)
    assert kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(9), version=ts)).not_found
    assert kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(2), version=ts - 1)).not_found
    scan = kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=10, version=ts))
    assert [(p.key, p.value) for p in scan.pairs] == [(row(1), b"a"), (row(2), b"b"), (row(3), b"c")]
    rev = kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(3), end_key=row(0),
                                            reverse=True, limit=10, version=ts, key_only=True))
    assert [(p.key, p.value) for p in rev.pairs] == [(row(2), b""), (row(1), b"")]
    assert not kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=0,
                                                 version=ts)).pairs
    batch = kv.KvBatchGet(kvrpcpb_pb2.BatchGetRequest(context=ctx(table_region), keys=[row(3), row(9), row(1)],
                                                      version=ts))
    assert [(p.key, p.value) for p in batch.pairs] == [(row(3), b"c"), (row(1), b"a")]


def test_scan_is_clipped_to_the_region(sim_cluster, channels, table_region):
    commit_rows(sim_cluster, {1: b"a"})
    start = sim_cluster.tso.next()
    other_table = record_key(TABLE + 1, 1)
    sim_cluster.mvcc.prewrite([("put", other_table, b"z")], other_table, start, 3000)
    sim_cluster.mvcc.commit([other_table], start, sim_cluster.tso.next())
    kv = channels(table_region.leader_store_id)
    scan = kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=10,
                                             version=sim_cluster.tso.next()))
    assert [p.key for p in scan.pairs] == [row(1)]


def test_locks_per_pair_and_on_get(sim_cluster, channels, table_region):
    commit_rows(sim_cluster, {1: b"a", 2: b"b"})
    start = sim_cluster.tso.next()
    sim_cluster.mvcc.prewrite([("put", row(2), b"new")], row(2), start, 3000)
    read_ts = sim_cluster.tso.next()
    kv = channels(table_region.leader_store_id)
    got = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(2), version=read_ts))
    assert got.error.locked.lock_version == start and got.error.locked.primary_lock == row(2)
    assert got.error.locked.key == row(2) and got.error.locked.lock_type == kvrpcpb_pb2.Put
    scan = kv.KvScan(kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=10, version=read_ts))
    assert scan.pairs[0].key == row(1)
    assert scan.pairs[1].key == b"" and scan.pairs[1].error.locked.key == row(2)
    assert not scan.HasField("error")
    batch = kv.KvBatchGet(kvrpcpb_pb2.BatchGetRequest(context=ctx(table_region), keys=[row(2)], version=read_ts))
    assert batch.pairs[0].error.locked.lock_version == start
    resolved = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region, resolved_locks=[start]), key=row(2),
                                               version=read_ts))
    assert resolved.value == b"b"
    through = kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region, committed_locks=[start]), key=row(2),
                                              version=read_ts))
    assert through.value == b"new"


def test_check_txn_status_and_resolve_lock(sim_cluster, channels, table_region):
    start = compose(physical_ms(sim_cluster.tso.next()) - 10_000)  # a txn that began 10 s ago
    sim_cluster.mvcc.prewrite([("put", row(1), b"x"), ("put", row(2), b"y")], row(1), start, 3000)
    kv = channels(table_region.leader_store_id)
    now = sim_cluster.tso.next()
    status = kv.KvCheckTxnStatus(kvrpcpb_pb2.CheckTxnStatusRequest(
        context=ctx(table_region), primary_key=row(1), lock_ts=start, caller_start_ts=now, current_ts=now,
        verify_is_primary=True))
    assert (status.lock_ttl, status.commit_version, status.action) == (0, 0, kvrpcpb_pb2.TTLExpireRollback)
    locks = kv.KvScanLock(kvrpcpb_pb2.ScanLockRequest(context=ctx(table_region), max_version=now))
    assert [lk.key for lk in locks.locks] == [row(2)]
    kv.KvResolveLock(kvrpcpb_pb2.ResolveLockRequest(context=ctx(table_region), start_version=start))
    assert not kv.KvScanLock(kvrpcpb_pb2.ScanLockRequest(context=ctx(table_region), max_version=now)).locks
    missing = kv.KvCheckTxnStatus(kvrpcpb_pb2.CheckTxnStatusRequest(
        context=ctx(table_region), primary_key=row(5), lock_ts=now - 1, caller_start_ts=now, current_ts=now))
    assert missing.error.txn_not_found.start_ts == now - 1
    bad_commit = kv.KvResolveLock(kvrpcpb_pb2.ResolveLockRequest(
        context=ctx(table_region), start_version=start, commit_version=now, keys=[row(2)]))
    assert bad_commit.error.HasField("txn_lock_not_found")


def test_committed_txn_status_resolves_by_commit(sim_cluster, channels, table_region):
    start = sim_cluster.tso.next()
    sim_cluster.mvcc.prewrite([("put", row(1), b"x"), ("put", row(2), b"y")], row(1), start, 60_000)
    commit = sim_cluster.tso.next()
    sim_cluster.mvcc.commit([row(1)], start, commit)  # primary committed, secondary still locked
    kv = channels(table_region.leader_store_id)
    now = sim_cluster.tso.next()
    status = kv.KvCheckTxnStatus(kvrpcpb_pb2.CheckTxnStatusRequest(
        context=ctx(table_region), primary_key=row(1), lock_ts=start, caller_start_ts=now, current_ts=now))
    assert status.commit_version == commit
    kv.KvResolveLock(kvrpcpb_pb2.ResolveLockRequest(context=ctx(table_region), start_version=start,
                                                    commit_version=commit, keys=[row(2)]))
    assert kv.KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(2), version=now)).value == b"y"


def test_region_errors(sim_cluster, channels, table_region):
    leader = table_region.leader_store_id
    follower = next(s for s in table_region.store_ids() if s != leader)
    outsider = next((s for s in (1, 2, 3) if s not in table_region.store_ids()), None)
    req = kvrpcpb_pb2.GetRequest(key=row(1), version=sim_cluster.tso.next())

    def get(store: int, context: kvrpcpb_pb2.Context) -> kvrpcpb_pb2.GetResponse:
        req.context.CopyFrom(context)
        return channels(store).KvGet(req)

    not_leader = get(follower, ctx(table_region, follower)).region_error.not_leader
    assert not_leader.region_id == table_region.id and not_leader.leader.store_id == leader
    assert get(follower, ctx(table_region, leader)).region_error.HasField("store_not_match")
    missing = ctx(table_region)
    missing.region_id = 999_999
    assert get(leader, missing).region_error.region_not_found.region_id == 999_999
    if outsider is not None:
        assert get(outsider, ctx(table_region, outsider)).region_error.HasField("region_not_found")
    no_epoch = ctx(table_region)
    no_epoch.ClearField("region_epoch")
    assert get(leader, no_epoch).region_error.message == "missing epoch!"
    req.key = record_key(TABLE + 1, 1)
    outside = get(leader, ctx(table_region)).region_error.key_not_in_region
    assert outside.key == encode_bytes(req.key) and outside.start_key == table_split_key(TABLE)


def test_epoch_not_match_after_split(sim_cluster, channels, table_region):
    stale = table_region
    left, right = sim_cluster.split_region(stale.id, encode_bytes(row(50)))
    resp = channels(right.leader_store_id).KvGet(kvrpcpb_pb2.GetRequest(
        context=ctx(stale, right.leader_store_id), key=row(60), version=sim_cluster.tso.next()))
    current = resp.region_error.epoch_not_match.current_regions
    assert {(r.id, r.start_key, r.end_key) for r in current} >= {(right.id, encode_bytes(row(50)), right.end_key)}
    assert left.id in {r.id for r in current}
    assert all(r.region_epoch.version == stale.version + 1 for r in current)


def test_cluster_id_mismatch_and_busy_and_slow(sim_cluster, channels, table_region):
    kv = channels(table_region.leader_store_id)
    bad = ctx(table_region, cluster_id=sim_cluster.cluster_id + 1)
    with pytest.raises(grpc.RpcError) as err:
        kv.KvGet(kvrpcpb_pb2.GetRequest(context=bad, key=row(1), version=1))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    good = kvrpcpb_pb2.GetRequest(context=ctx(table_region, cluster_id=sim_cluster.cluster_id), key=row(1), version=1)
    assert kv.KvGet(good).not_found
    sim_cluster.faults.make_busy(table_region.leader_store_id, 5_000)
    busy = kv.KvGet(good).region_error.server_is_busy
    assert busy.backoff_ms > 0
    sim_cluster.faults.clear()
    sim_cluster.faults.set_slow(table_region.leader_store_id, 150)
    began = time.monotonic()
    kv.KvGet(good)
    assert time.monotonic() - began >= 0.15


def test_leader_transfer_and_store_stop(sim_cluster, channels, table_region):
    ts = commit_rows(sim_cluster, {1: b"a"})
    old_leader = table_region.leader_store_id
    new_leader = next(s for s in table_region.store_ids() if s != old_leader)
    moved = sim_cluster.transfer_leader(table_region.id, new_leader)
    resp = channels(old_leader).KvGet(kvrpcpb_pb2.GetRequest(context=ctx(table_region, old_leader), key=row(1),
                                                             version=ts))
    assert resp.region_error.not_leader.leader.store_id == new_leader
    assert channels(new_leader).KvGet(kvrpcpb_pb2.GetRequest(context=ctx(moved), key=row(1), version=ts)).value == b"a"

    sim_cluster.stop_store(new_leader)
    with pytest.raises(grpc.RpcError) as err:
        channels(new_leader).KvGet(kvrpcpb_pb2.GetRequest(context=ctx(moved), key=row(1), version=ts), timeout=2)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    deadline = time.monotonic() + 5
    while sim_cluster.regions.get(moved.id).leader_store_id == new_leader and time.monotonic() < deadline:
        time.sleep(0.05)
    failed_over = sim_cluster.regions.get(moved.id)
    assert failed_over.leader_store_id != new_leader
    got = channels(failed_over.leader_store_id).KvGet(kvrpcpb_pb2.GetRequest(context=ctx(failed_over), key=row(1),
                                                                             version=ts))
    assert got.value == b"a"
    sim_cluster.start_store(new_leader)
    port = sim_cluster.store_addresses[new_leader]
    resp = channels(new_leader).KvGet(kvrpcpb_pb2.GetRequest(context=ctx(failed_over, new_leader), key=row(1),
                                                             version=ts), timeout=5, wait_for_ready=True)
    assert resp.region_error.not_leader.leader.store_id == failed_over.leader_store_id
    assert sim_cluster.store_addresses[new_leader] == port
