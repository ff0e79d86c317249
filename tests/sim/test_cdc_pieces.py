"""CDC servicer building blocks: feature gates, observed ranges, row packing, resolved-ts chunks, recorder."""

from __future__ import annotations

import random

import pytest

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cdc_conn import Conn
from tidelake.sim.cdc_downstream import Downstream, DownstreamState
from tidelake.sim.cdc_features import (
    FeatureGate,
    UnknownFeatures,
    features_from_metadata,
    parse_features,
)
from tidelake.sim.cdc_memory_quota import SinkMemoryQuota
from tidelake.sim.cdc_observed_range import (
    ObservedRange,
    raw_lower_bound,
    raw_upper_bound,
)
from tidelake.sim.cdc_recorder import RecordKind, StreamRecorder, read_records
from tidelake.sim.cdc_resolved_ts import ResolvedRegionHeap, emit
from tidelake.sim.cdc_rows import (
    CDC_EVENT_MAX_BYTES,
    LogType,
    OpType,
    Row,
    pack_scan_rows,
    realtime_rows,
)
from tidelake.sim.mvcc import ApplyBatch, ApplyEntry

# ---- feature gates (docs/wire.md#connection-setup) ---------------------------------------------------

def test_features_header_known_and_unknown():
    assert parse_features("stream-multiplexing") == ("stream-multiplexing",)
    assert parse_features(" stream-multiplexing ") == ("stream-multiplexing",)
    with pytest.raises(UnknownFeatures) as err:
        parse_features("stream-multiplexing,teleport,warp")
    assert str(err.value) == "teleport,warp"
    with pytest.raises(UnknownFeatures):
        parse_features("")  # TiKV splits "" into one empty, unknown feature
    assert features_from_metadata((("user-agent", "x"),)) == ()


@pytest.mark.parametrize("version,batch,validate", [
    ("8.5.0", True, True), ("5.3.0", True, True), ("5.3.0-alpha", True, False), ("5.2.9", True, False),
    ("4.0.8", True, False), ("4.0.8-rc", False, False), ("4.0.7", False, False), ("", False, False),
    ("v8.5.0", False, False), ("10.0.0+build.1", True, True),
])
def test_feature_gate_by_version(version, batch, validate):
    gate = FeatureGate.for_connection(version, ())
    assert (gate.batch_resolved_ts, gate.validate_cluster_id, gate.stream_multiplexing) == (batch, validate, False)
    assert FeatureGate.for_connection(version, ("stream-multiplexing",)).stream_multiplexing


# ---- observed range (docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc) -------------------------------------------

def test_clip_and_contains():
    region = (encode_bytes(b"b"), encode_bytes(b"m"))
    r = ObservedRange.clip(encode_bytes(b"a"), b"", *region)
    assert r == ObservedRange(encode_bytes(b"b"), encode_bytes(b"m"))
    assert r.contains_raw(b"b") and r.contains_raw(b"lzzz") and not r.contains_raw(b"m") and not r.contains_raw(b"a")
    assert ObservedRange.clip(b"", b"", b"", b"").contains_raw(b"\xff" * 20)
    assert ObservedRange.clip(encode_bytes(b"x"), b"", *region).is_empty()


def test_requested_range_falls_back_to_the_region_when_a_key_does_not_decode():
    region = (encode_bytes(b"b"), encode_bytes(b"m"))
    whole = ObservedRange(*region)
    assert ObservedRange.requested(encode_bytes(b"c"), encode_bytes(b"d"), *region) == ObservedRange(
        encode_bytes(b"c"), encode_bytes(b"d"))
    assert ObservedRange.requested(b"c", b"d", *region) == whole  # raw keys (Java's CDCClient)
    assert ObservedRange.requested(encode_bytes(b"c"), b"\xff" * 5, *region) == whole  # TiCDC's HackSpan end
    assert ObservedRange.requested(b"", encode_bytes(b"d"), *region) == whole  # empty does not decode either


def test_raw_bounds_exact_for_valid_encodings_and_safe_otherwise():
    rng = random.Random(7)
    keys = sorted({bytes(rng.randrange(256) for _ in range(rng.randrange(0, 20))) for _ in range(400)})
    bounds = [encode_bytes(k) for k in keys[::37]] + [b"\xff" * 5, encode_bytes(b"abc")[:5], b"t\x80\x00"]
    for bound in bounds:
        lo, hi = raw_lower_bound(bound), raw_upper_bound(bound)
        for k in keys:
            enc = encode_bytes(k)
            if enc >= bound:
                assert k >= lo, (bound, k)
            if enc < bound:
                assert hi is None or k < hi, (bound, k)
        if bound in {encode_bytes(k) for k in keys}:
            exact = next(k for k in keys if encode_bytes(k) == bound)
            assert lo == exact == hi


# ---- rows (docs/wire.md#incremental-scan) -------------------------------------------------------

def test_realtime_row_shapes():
    long_value = b"v" * 256
    pre = realtime_rows(ApplyBatch("prewrite", [ApplyEntry(b"k", 10, 0, "put", b"new", b"old")]))
    assert [(r.type, r.op_type, r.value, r.old_value, r.commit_ts) for r in pre] == [
        (LogType.PREWRITE, OpType.PUT, b"new", b"old", 0)]
    com = realtime_rows(ApplyBatch("commit", [ApplyEntry(b"k", 10, 11, "put", b"new", b"old"),
                                              ApplyEntry(b"l", 10, 11, "put", long_value, b""),
                                              ApplyEntry(b"m", 10, 11, "delete", b"", b"x")]))
    assert [(r.type, r.op_type, r.value, r.old_value, r.commit_ts) for r in com] == [
        (LogType.COMMIT, OpType.PUT, b"new", b"", 11), (LogType.COMMIT, OpType.PUT, b"", b"", 11),
        (LogType.COMMIT, OpType.DELETE, b"", b"", 11)]
    rb = realtime_rows(ApplyBatch("rollback", [ApplyEntry(b"k", 10, 0, "rollback", b"", b"")]))
    assert [(r.type, r.op_type, r.start_ts, r.commit_ts) for r in rb] == [(LogType.ROLLBACK, OpType.UNKNOWN, 10, 0)]
    one = realtime_rows(ApplyBatch("one_pc", [ApplyEntry(b"k", 10, 12, "put", b"n", b"o")]))
    assert [(r.type, r.value, r.old_value, r.commit_ts) for r in one] == [(LogType.COMMITTED, b"n", b"o", 12)]


def test_scan_packing_splits_at_32k_and_ends_with_initialized():
    rows = [Row(type=LogType.COMMITTED, key=b"k%05d" % i, value=b"x" * 1000, commit_ts=5) for i in range(100)]
    groups = pack_scan_rows(rows)
    flat = [r for g in groups for r in g]
    assert flat[:-1] == rows and flat[-1].type == LogType.INITIALIZED
    assert [r.type for g in groups[:-1] for r in g].count(LogType.INITIALIZED) == 0
    for g in groups:
        assert sum(len(r.key) + len(r.value) + len(r.old_value) for r in g) < CDC_EVENT_MAX_BYTES
    assert len(groups) == 4  # 100 rows of 1006 bytes: 32 rows fit under 32 KiB per Event
    assert [len(g) for g in pack_scan_rows([])] == [1]


# ---- resolved ts chunks (docs/wire.md#resolved-ts) ----------------------------------------------

def _normal_downstream(conn: Conn, region_id: int, request_id: int = 0) -> Downstream:
    d = Downstream(conn, request_id, region_id, 1, 0, ObservedRange(b"", b""))
    d.state = DownstreamState.NORMAL
    return d


def test_resolved_heap_chunks_8_32_128_slowest_first():
    conn = Conn("peer", "EventFeed", ())
    heap = ResolvedRegionHeap()
    for region_id in range(1, 201):
        heap.push(1000 + region_id, _normal_downstream(conn, region_id))
    chunks = list(heap.chunks())
    assert [len(c) for c in chunks] == [8, 32, 128, 32]
    assert [d.region_id for _, d in chunks[0]] == list(range(1, 9))


def test_emit_one_resolved_ts_per_chunk_with_min_ts():
    conn = Conn("peer", "EventFeedV2", ("stream-multiplexing",))
    conn.set_version("8.5.0")
    heap = ResolvedRegionHeap()
    downstreams = [_normal_downstream(conn, r, request_id=7) for r in range(1, 11)]
    for d in downstreams:
        heap.push(100 + d.region_id, d)
    downstreams[0].state = DownstreamState.STOPPED  # stopped after advancing: left out
    emit({(conn, 7): heap})
    out = list(_drain(conn))
    assert [(list(m.resolved_ts.regions), m.resolved_ts.ts, m.resolved_ts.request_id) for m in out] == [
        (list(range(2, 9)), 102, 7), ([9, 10], 109, 7)]
    assert all(not m.events for m in out)


def test_emit_legacy_clients_get_per_region_events():
    conn = Conn("peer", "EventFeed", ())
    conn.set_version("4.0.7")
    heap = ResolvedRegionHeap()
    heap.push(55, _normal_downstream(conn, 3, request_id=9))
    emit({(conn, 0): heap})
    (msg,) = _drain(conn)
    assert [(e.region_id, e.request_id, e.resolved_ts) for e in msg.events] == [(3, 9, 55)]
    assert not msg.HasField("resolved_ts")


def _drain(conn: Conn):
    conn.finish()
    return list(conn.responses(lambda: True))


def test_events_batched_up_to_64_and_resolved_ts_alone():
    conn = Conn("peer", "EventFeed", ())
    with conn.lock:
        for i in range(70):
            conn.send_event(cdcpb_pb2.Event(region_id=i + 1))
        conn.send_resolved_ts(cdcpb_pb2.ResolvedTs(ts=5, regions=[1]))
        conn.send_event(cdcpb_pb2.Event(region_id=99))
    out = _drain(conn)
    assert [len(m.events) for m in out] == [64, 6, 0, 1]
    assert out[2].resolved_ts.ts == 5
    assert [e.region_id for m in out for e in m.events] == list(range(1, 71)) + [99]


def test_row_events_hold_sink_quota_until_sent_errors_are_forced():
    quota = SinkMemoryQuota(300)
    conn = Conn("peer", "EventFeed", (), quota)
    d = Downstream(conn, 1, 5, 1, 0, ObservedRange(b"", b""))
    rows = [(encode_bytes(b"k"), Row(type=LogType.PREWRITE, start_ts=9, key=b"k", value=b"v" * 100))]
    assert d.on_realtime(rows, False, False) and d.on_realtime(rows, False, False)
    held = quota.in_use
    assert 200 < held <= 300
    assert not d.on_realtime(rows, False, False)  # TiKV: SendError::Congested, nothing queued
    assert quota.in_use == held
    assert d.stop(cdcpb_pb2.Error(congested=cdcpb_pb2.Congested(region_id=5)))  # forced: fits anyway
    out = _drain(conn)
    assert [e.WhichOneof("event") for m in out for e in m.events] == ["entries", "entries", "error"]
    assert quota.in_use == 0  # handed to gRPC: freed


def test_a_scan_larger_than_the_quota_still_goes_out_and_holds_quota():
    quota = SinkMemoryQuota(100)
    conn = Conn("peer", "EventFeed", (), quota)
    d = Downstream(conn, 1, 5, 1, 0, ObservedRange(b"", b""))
    assert d.finish_scan([ApplyEntry(b"k", 9, 0, "put", b"v" * 500, b"")], False)  # no livelock on a big region
    assert d.state is DownstreamState.NORMAL and quota.in_use > 500
    rows = [(encode_bytes(b"k"), Row(type=LogType.PREWRITE, start_ts=10, key=b"k", value=b"w"))]
    assert not d.on_realtime(rows, False, False)  # realtime rows congest while the scan drains
    assert [r.type for m in _drain(conn) for e in m.events for r in e.entries.entries] == [
        LogType.PREWRITE, LogType.INITIALIZED]
    assert quota.in_use == 0  # handed to gRPC: freed


def test_discarded_stream_gives_its_quota_back():
    quota = SinkMemoryQuota(10_000)
    conn = Conn("peer", "EventFeed", (), quota)
    with conn.lock:
        assert conn.try_send_events([cdcpb_pb2.Event(region_id=1, entries=cdcpb_pb2.Event.Entries(
            entries=[Row(key=b"k" * 50)]))])
    assert quota.in_use > 0
    conn.discard_pending()
    assert quota.in_use == 0
    with conn.lock:
        assert conn.try_send_events([cdcpb_pb2.Event(region_id=1)])  # closed: dropped, nothing held
    assert quota.in_use == 0


# ---- recorder --------------------------------------------------------------------------------

def test_recorder_round_trip(tmp_path):
    path = tmp_path / "store1.cdcrec"
    rec = StreamRecorder(path)
    req = cdcpb_pb2.ChangeDataRequest(region_id=3, request_id=4, checkpoint_ts=9)
    ev = cdcpb_pb2.ChangeDataEvent(resolved_ts=cdcpb_pb2.ResolvedTs(ts=10, regions=[3], request_id=4))
    rec.open_stream(1, 1, "EventFeedV2", ("stream-multiplexing",), "ipv4:127.0.0.1:1")
    rec.request(1, req.SerializeToString())
    rec.event(1, ev.SerializeToString())
    rec.close_stream(1, "OK")
    rec.close()
    records = list(read_records(path))
    assert [r.kind for r in records] == [RecordKind.OPEN, RecordKind.REQUEST, RecordKind.EVENT, RecordKind.CLOSE]
    assert cdcpb_pb2.ChangeDataRequest.FromString(records[1].payload) == req
    assert cdcpb_pb2.ChangeDataEvent.FromString(records[2].payload) == ev
    with open(path, "ab") as f:
        f.write(b"\x03\x00")  # a record cut short by a crash is ignored
    assert len(list(read_records(path))) == 4
