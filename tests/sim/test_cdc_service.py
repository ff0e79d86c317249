"""The ChangeData servicer over real gRPC on loopback (docs/wire.md#tikv-cdc-server-behaviour, docs/wire.md#invariants-a-simulated-tikv-cdc-server-must-respect)."""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest
from cdc_harness import (
    MUX,
    MiniCluster,
    Stream,
    events,
    has_error,
    has_initialized,
    has_resolved,
    register_request,
    rows,
)

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2, cdcpb_pb2_grpc
from tidelake.sim.cdc_recorder import RecordKind, read_records

T = cdcpb_pb2.Event.LogType
OP = cdcpb_pb2.Event.Row.OpType


@pytest.fixture
def cluster():
    c = MiniCluster()
    yield c
    c.close()


@pytest.fixture
def stream(cluster):
    s = Stream(cluster.addresses[1])
    yield s
    s.close()


def test_scan_then_initialized_then_resolved_ts_and_checkpoint_filter(cluster, stream):
    _, old_commit = cluster.write({b"a": b"1", b"b": b"1"})
    checkpoint = cluster.tso.next()
    _, new_commit = cluster.write({b"a": b"2"})
    lock_start, _ = cluster.write({b"c": b"locked"}, commit=False)
    region = cluster.region_of(b"a")
    stream.send(register_request(region, checkpoint))
    msgs = stream.collect_until(has_initialized)
    assert not any(m.HasField("resolved_ts") for m in msgs)
    scan = rows(msgs)
    assert [(r.type, r.key, r.value, r.old_value, r.commit_ts) for r in scan] == [
        (T.COMMITTED, b"a", b"2", b"1", new_commit),
        (T.PREWRITE, b"c", b"locked", b"", 0),
        (T.INITIALIZED, b"", b"", b"", 0),
    ]
    assert old_commit < checkpoint < new_commit
    assert events(msgs)[-1].entries.entries[-1].type == T.INITIALIZED
    assert all(e.region_id == region.id and e.request_id == 1 for e in events(msgs))
    resolved = stream.collect_until(has_resolved)[-1].resolved_ts
    assert list(resolved.regions) == [region.id] and resolved.request_id == 1
    assert resolved.ts <= lock_start  # held back by the lock (docs/wire.md#resolved-ts)
    commit_ts = cluster.tso.next()
    cluster.mvcc.commit([b"c"], lock_start, commit_ts)
    after = stream.collect_until(lambda m: has_resolved(m, commit_ts))
    commits = rows(after)
    assert [(r.type, r.key, r.commit_ts, r.start_ts) for r in commits] == [(T.COMMIT, b"c", commit_ts, lock_start)]
    assert after.index(next(m for m in after if m.events)) < len(after) - 1  # COMMIT before the resolved ts


def test_realtime_prewrite_commit_rollback_and_old_values(cluster, stream):
    cluster.write({b"k": b"old"})
    stream.send(register_request(cluster.region_of(b"k"), cluster.tso.next()))
    stream.collect_until(has_initialized)
    start, commit = cluster.write({b"k": b"new", b"gone": None})
    rb_start = cluster.tso.next()
    cluster.mvcc.prewrite([("put", b"r", b"x")], b"r", rb_start, 3000)
    cluster.mvcc.rollback([b"r"], rb_start)
    one_start = cluster.tso.next()
    one_commit = cluster.tso.next()
    cluster.mvcc.commit_one_pc([("put", b"k", b"1pc")], one_start, one_commit)
    msgs = stream.collect_until(lambda m: any(r.type == T.COMMITTED for r in rows([m])))
    got = [(r.type, r.op_type, r.key, r.value, r.old_value, r.start_ts, r.commit_ts) for r in rows(msgs)]
    assert got == [
        (T.PREWRITE, OP.PUT, b"k", b"new", b"old", start, 0),
        (T.PREWRITE, OP.DELETE, b"gone", b"", b"", start, 0),
        (T.COMMIT, OP.PUT, b"k", b"new", b"", start, commit),
        (T.COMMIT, OP.DELETE, b"gone", b"", b"", start, commit),
        (T.PREWRITE, OP.PUT, b"r", b"x", b"", rb_start, 0),
        (T.ROLLBACK, OP.UNKNOWN, b"r", b"", b"", rb_start, 0),
        (T.COMMITTED, OP.PUT, b"k", b"1pc", b"new", one_start, one_commit),
    ]


def test_rows_filtered_to_request_range(cluster, stream):
    region = cluster.region_of(b"m")
    stream.send(register_request(region, cluster.tso.next(), start=encode_bytes(b"b"), end=encode_bytes(b"d")))
    stream.collect_until(has_initialized)
    cluster.write({b"a": b"x", b"b": b"x", b"c9": b"x", b"d": b"x"})
    msgs = stream.collect_until(lambda m: len(rows([m])) > 0)
    assert sorted({r.key for r in rows(msgs + stream.drain(0.2))}) == [b"b", b"c9"]


def test_raw_request_keys_observe_the_whole_region(cluster, stream):
    """Java's CDCClient sends raw keys; TiKV cannot decode them and observes the whole region (docs/wire.md#register)."""
    region = cluster.region_of(b"m")
    stream.send(register_request(region, cluster.tso.next(), start=b"b", end=b"d"))
    stream.collect_until(has_initialized)
    cluster.write({b"a": b"x", b"b": b"x", b"c9": b"x", b"d": b"x"})
    msgs = stream.collect_until(lambda m: len(rows([m])) > 0)
    assert sorted({r.key for r in rows(msgs + stream.drain(0.2))}) == [b"a", b"b", b"c9", b"d"]


def test_multiplexing_two_request_ids_on_one_stream(cluster, stream):
    region = cluster.region_of(b"a")
    stream.send(register_request(region, cluster.tso.next(), request_id=1))
    stream.send(register_request(region, cluster.tso.next(), request_id=2))
    msgs = stream.collect_until(lambda m: has_resolved(m) and m.resolved_ts.request_id == 2, timeout=5)
    msgs += stream.collect_until(lambda m: has_resolved(m) and m.resolved_ts.request_id == 1, timeout=5)
    assert sum(r.type == T.INITIALIZED for r in rows(msgs, request_id=1)) == 1
    assert sum(r.type == T.INITIALIZED for r in rows(msgs, request_id=2)) == 1
    cluster.write({b"a": b"v"})
    later = stream.collect_until(lambda m: bool(events([m])))
    later += stream.drain(0.3)
    assert {e.request_id for e in events(later)} == {1, 2}
    assert all(m.resolved_ts.request_id in (1, 2) for m in later if m.HasField("resolved_ts"))


def test_plain_stream_resolved_ts_request_id_zero(cluster):
    s = Stream(cluster.addresses[1], v2=False)
    try:
        s.send(register_request(cluster.region_of(b"a"), cluster.tso.next(), request_id=5))
        resolved = s.collect_until(has_resolved)[-1].resolved_ts
        assert resolved.request_id == 0
    finally:
        s.close()


def test_duplicate_request(cluster, stream):
    region = cluster.region_of(b"a")
    stream.send(register_request(region, cluster.tso.next()))
    stream.send(register_request(region, cluster.tso.next()))
    msgs = stream.collect_until(has_error)
    err = events(msgs)[-1].error
    assert err.HasField("duplicate_request") and err.duplicate_request.region_id == region.id


@pytest.mark.parametrize("version,rejected", [("8.5.0", True), ("5.2.0", False)])
def test_cluster_id_checked_from_5_3_0(cluster, stream, version, rejected):
    stream.send(register_request(cluster.region_of(b"a"), cluster.tso.next(), cluster_id=42, version=version))
    first = stream.collect_until(lambda m: has_error(m) or has_initialized(m))[-1]
    if rejected:
        err = first.events[0].error.cluster_id_mismatch
        assert (err.current, err.request) == (cluster.cluster_id, 42)
    else:
        assert has_initialized(first)


def test_unknown_v2_feature_is_unimplemented_and_probe_closes_ok(cluster):
    bad = Stream(cluster.addresses[1], metadata=(("features", "stream-multiplexing,teleport"),))
    assert bad.next() is None
    assert bad.error.code() == grpc.StatusCode.UNIMPLEMENTED and bad.error.details() == "teleport"
    probe = Stream(cluster.addresses[1], metadata=MUX)  # TiCDC's probe (docs/wire.md#stream-setup)
    probe.close_send()
    assert probe.next() is None and probe.error is None


def test_deregister_whole_request_id_then_silence(cluster, stream):
    left, right = cluster.regions.split(cluster.region_of(b"a").id, encode_bytes(b"m"))
    for region in (left, right):
        stream.send(register_request(region, cluster.tso.next(), request_id=3))
    stream.send(register_request(left, cluster.tso.next(), request_id=4))
    stream.collect_until(lambda m: has_resolved(m) and m.resolved_ts.request_id == 3 and len(m.resolved_ts.regions) == 2)
    stream.send(cdcpb_pb2.ChangeDataRequest(request_id=3, deregister=cdcpb_pb2.ChangeDataRequest.Deregister()))
    msgs = stream.collect_until(has_error)
    msgs += stream.drain(0.4)
    errors = [e for e in events(msgs, request_id=3) if e.HasField("error")]
    assert sorted(e.region_id for e in errors) == sorted([left.id, right.id])
    assert all(e.error.region_not_found.region_id == e.region_id for e in errors)
    cluster.write({b"b": b"1", b"x": b"1"})
    after = stream.drain(0.4)
    assert not events(after, request_id=3) and not [m for m in after if m.resolved_ts.request_id == 3
                                                     and m.HasField("resolved_ts")]
    assert [r.key for r in rows(after, request_id=4)] == [b"b", b"b"]  # request 4 still served


def test_notify_txn_status_fails_the_stream(cluster, stream):
    stream.send(cdcpb_pb2.ChangeDataRequest(region_id=1, notify_txn_status=cdcpb_pb2.ChangeDataRequest.NotifyTxnStatus()))
    assert stream.collect_until(lambda m: m is None)[-1] is None
    assert stream.error.code() == grpc.StatusCode.UNAVAILABLE


def test_split_gives_epoch_not_match_with_new_regions_then_silence(cluster, stream):
    region = cluster.region_of(b"a")
    stream.send(register_request(region, cluster.tso.next()))
    stream.collect_until(has_resolved)
    left, right = cluster.regions.split(region.id, encode_bytes(b"m"))
    msgs = stream.collect_until(has_error)
    err = events(msgs)[-1].error.epoch_not_match
    assert [(r.id, r.region_epoch.version) for r in err.current_regions] == [(left.id, 2), (right.id, 2)]
    cluster.write({b"a": b"1"})
    assert not [m for m in stream.drain(0.3) if m.events or m.resolved_ts.regions]


def test_stale_epoch_and_unknown_region_at_register(cluster, stream):
    region = cluster.region_of(b"a")
    cluster.regions.split(region.id, encode_bytes(b"m"))
    stream.send(register_request(region, cluster.tso.next()))  # carries version 1, region is at 2
    err = events(stream.collect_until(has_error))[-1].error
    assert err.HasField("epoch_not_match") and err.epoch_not_match.current_regions[0].region_epoch.version == 2
    ghost = cdcpb_pb2.ChangeDataRequest(region_id=999, request_id=1, header=cdcpb_pb2.Header(
        cluster_id=cluster.cluster_id, ticdc_version="8.5.0"))
    stream.send(ghost)
    err = events(stream.collect_until(has_error))[-1].error
    assert err.region_not_found.region_id == 999


def test_kv_api_must_be_tidb(cluster, stream):
    req = register_request(cluster.region_of(b"a"), cluster.tso.next())
    req.kv_api = cdcpb_pb2.ChangeDataRequest.KvAPI.TxnKV
    stream.send(req)
    assert events(stream.collect_until(has_error))[-1].error.compatibility.required_version == "6.2.0"


def test_server_is_busy_burst_and_congested(cluster, stream):
    region = cluster.region_of(b"a")
    cluster.faults.make_busy(1, 10_000)
    stream.send(register_request(region, cluster.tso.next(), request_id=1))
    assert events(stream.collect_until(has_error))[-1].error.server_is_busy.reason
    cluster.faults.clear()
    stream.send(register_request(region, cluster.tso.next(), request_id=2))
    stream.collect_until(has_resolved)
    cluster.faults.congest(region.id)
    err = events(stream.collect_until(has_error))[-1]
    assert err.request_id == 2 and err.error.congested.region_id == region.id


def test_client_that_stops_reading_is_congested_not_buffered_without_bound():
    """TiKV's sink memory quota (docs/wire.md#errors-raised-after-registration): rows a slow client has not taken hold
    quota; once it is spent the region fails `congested` instead of the store buffering on."""
    quota = 256 * 1024
    c = MiniCluster(sink_memory_quota_bytes=quota)
    requests: queue.SimpleQueue = queue.SimpleQueue()
    channel = grpc.insecure_channel(c.addresses[1])
    call = cdcpb_pb2_grpc.ChangeDataStub(channel).EventFeedV2(iter(requests.get, None), metadata=MUX)
    try:
        region = c.region_of(b"a")
        requests.put(register_request(region, c.tso.next()))
        service = c.services[1]
        wait = time.monotonic() + 5
        while not service._downstreams or service._downstreams[0].state.value != "normal":
            assert time.monotonic() < wait
            time.sleep(0.01)
        for i in range(400):  # ~20 MB while nobody reads: far past gRPC's flow-control windows
            c.write({b"a%05d" % i: b"x" * 50_000})
            assert service._quota.in_use <= quota
        congested = None
        for msg in call:
            congested = next((e for e in msg.events if e.HasField("error")), None)
            if congested is not None:
                break
        assert congested.error.congested.region_id == region.id and congested.request_id == 1
    finally:
        requests.put(None)
        call.cancel()
        channel.close()
        c.close()
    assert service._quota.in_use == 0


def test_reset_streams_and_store_stop_break_streams(cluster):
    s = Stream(cluster.addresses[1])
    s.send(register_request(cluster.region_of(b"a"), cluster.tso.next()))
    s.collect_until(has_initialized)
    cluster.faults.reset_streams(1)
    assert s.collect_until(lambda m: False)[-1] is None and s.error.code() == grpc.StatusCode.UNAVAILABLE
    s2 = Stream(cluster.addresses[1])
    s2.send(register_request(cluster.region_of(b"a"), cluster.tso.next()))
    s2.collect_until(has_initialized)
    cluster.stop_store(1)
    assert s2.collect_until(lambda m: False)[-1] is None
    assert s2.error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


def test_legacy_client_gets_per_region_resolved_ts_events(cluster):
    s = Stream(cluster.addresses[1], v2=False)
    try:
        region = cluster.region_of(b"a")
        s.send(register_request(region, cluster.tso.next(), request_id=9, version="4.0.7"))
        msgs = s.collect_until(lambda m: any(e.WhichOneof("event") == "resolved_ts" for e in m.events))
        ev = [e for e in events(msgs) if e.WhichOneof("event") == "resolved_ts"][0]
        assert (ev.region_id, ev.request_id) == (region.id, 9) and ev.resolved_ts > 0
        assert not any(m.HasField("resolved_ts") for m in msgs)
    finally:
        s.close()


def test_resolved_ts_chunks_8_then_32(cluster, stream):
    region = cluster.region_of(b"a")
    for i in range(1, 50):
        region = cluster.regions.split(region.id, encode_bytes(b"k%03d" % i))[1]
    regions = cluster.regions.all()
    assert len(regions) == 50
    for r in regions:
        stream.send(register_request(r, cluster.tso.next()))
    # once every region is NORMAL, each tick yields chunks of 8, 32, then the 10 left
    msgs = stream.collect_until(lambda m: has_resolved(m) and len(m.resolved_ts.regions) == 10, timeout=10)
    tail = [m for m in msgs if m.HasField("resolved_ts")][-3:]
    assert [len(m.resolved_ts.regions) for m in tail] == [8, 32, 10]
    assert tail[0].resolved_ts.ts <= tail[1].resolved_ts.ts <= tail[2].resolved_ts.ts
    assert all(not m.events for m in tail)


def test_leader_transfer_gives_not_leader_with_new_leader():
    c = MiniCluster(n_stores=3)
    try:
        region = c.region_of(b"a")
        s = Stream(c.addresses[region.leader_store_id])
        s.send(register_request(region, c.tso.next()))
        s.collect_until(has_resolved)
        other = next(sid for _, sid in region.peers if sid != region.leader_store_id)
        moved = c.regions.transfer_leader(region.id, other)
        err = events(s.collect_until(has_error))[-1].error.not_leader
        assert err.region_id == region.id and err.leader == moved.leader_peer()
        s2 = Stream(c.addresses[region.leader_store_id])  # the old leader now refuses the region
        s2.send(register_request(moved, c.tso.next()))
        err = events(s2.collect_until(has_error))[-1].error.not_leader
        assert err.leader.store_id == other
        s.close()
        s2.close()
    finally:
        c.close()


def test_commit_before_prewrite_fault_stays_within_13_3(cluster, stream):
    cluster.faults.commit_before_prewrite = True
    region = cluster.region_of(b"a")
    start_ts = cluster.tso.next()
    cluster.mvcc.prewrite([("put", b"a", b"v")], b"a", start_ts, 3000)
    service = cluster.services[1]
    gate = threading.Event()
    holds = [service._scan_pool.submit(gate.wait, 5) for _ in range(2)]  # park this store's scan threads
    stream.send(register_request(region, cluster.tso.next()))
    deadline = time.monotonic() + 5
    while not service._downstreams and time.monotonic() < deadline:  # attached, scan not run yet
        time.sleep(0.01)
    b_start = cluster.tso.next()
    cluster.mvcc.prewrite([("put", b"b", b"w")], b"b", b_start, 3000)
    b_commit = cluster.tso.next()
    cluster.mvcc.commit([b"b"], b_start, b_commit)
    gate.set()
    for hold in holds:
        hold.result()
    got = [(r.type, r.key) for r in rows(stream.collect_until(has_initialized))]
    assert got.index((T.COMMIT, b"b")) < got.index((T.PREWRITE, b"b")) < got.index((T.INITIALIZED, b""))
    assert (T.PREWRITE, b"a") in got


def test_duplicate_delivery_fault_repeats_only_allowed_rows(cluster, stream):
    cluster.faults.duplicate_delivery = True
    checkpoint = cluster.tso.next()
    _, commit = cluster.write({b"a": b"1"})
    stream.send(register_request(cluster.region_of(b"a"), checkpoint))
    msgs = stream.collect_until(has_initialized)
    scan = [(r.type, r.commit_ts) for r in rows(msgs)]
    assert scan == [(T.COMMIT, commit), (T.COMMITTED, commit), (T.COMMITTED, commit), (T.INITIALIZED, 0)]
    stream.collect_until(has_resolved)
    start2, commit2 = cluster.write({b"a": b"2"})
    got = [(r.type, r.start_ts) for r in rows(stream.collect_until(lambda m: any(r.type == T.COMMIT for r in rows([m]))))]
    assert got == [(T.PREWRITE, start2), (T.PREWRITE, start2), (T.COMMIT, start2)]


def test_recorder_captures_requests_and_events(tmp_path):
    c = MiniCluster(record_dir=tmp_path)
    try:
        s = Stream(c.addresses[1])
        s.send(register_request(c.region_of(b"a"), c.tso.next(), request_id=11))
        s.collect_until(has_resolved)
        s.close_send()
        s.collect_until(lambda m: m is None)
    finally:
        c.close()
    records = list(read_records(tmp_path / "store1.cdcrec"))
    kinds = [r.kind for r in records]
    assert kinds[0] == RecordKind.OPEN and kinds[1] == RecordKind.REQUEST and kinds[-1] == RecordKind.CLOSE
    assert cdcpb_pb2.ChangeDataRequest.FromString(records[1].payload).request_id == 11
    sent = [cdcpb_pb2.ChangeDataEvent.FromString(r.payload) for r in records if r.kind == RecordKind.EVENT]
    assert any(has_initialized(m) for m in sent) and any(has_resolved(m) for m in sent)
    assert records[-1].payload == b"OK"
