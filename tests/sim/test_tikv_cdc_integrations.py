"""Scenarios of TiKV's own CDC integration tests, run against the simulator's EventFeed.

Each test is named after the TiKV test whose scenario it replays, from tikv/tikv
components/cdc/tests/integrations/test_cdc.rs (and test_flow_control.rs below); the code and
wording are ours. TiKV's suite talks to a region through the plain EventFeed with ticdc_version
4.0.8 (batch resolved ts) and an empty key range (the whole region), writes raw keys through
KvPrewrite/KvCommit, and sets a 100 ms min-ts interval; the simulator's MiniCluster does the
same through its MVCC store. Differences are named where a test adapts: TiKV's suite caps an
incremental scan at 2 rows per event (`set_max_scan_batch_size(2)`), the simulator packs rows up
to 32 KiB, so assertions are on rows, not on how they are batched. The TiKV tests the simulator
cannot run are listed, with the reason, in docs/tikv-cdc-tests.md.
"""

from __future__ import annotations

import pytest
from cdc_harness import MiniCluster, Stream, events, has_error, has_initialized, has_resolved, register_request, rows

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2

T = cdcpb_pb2.Event.LogType
OP = cdcpb_pb2.Event.Row.OpType
BATCH_RESOLVED_TS = "4.0.8"  # TiKV FeatureGate::batch_resolved_ts, what its suite's requests carry


def request(region, checkpoint_ts: int = 0, version: str = BATCH_RESOLVED_TS, **kw) -> cdcpb_pb2.ChangeDataRequest:
    """TiKV's `new_changedata_request`: whole region (empty keys), batch resolved ts, no old value."""
    req = register_request(region, checkpoint_ts, version=version, start=b"", end=b"", **kw)
    req.start_key, req.end_key, req.extra_op = b"", b"", 0
    return req


def with_old_value(req: cdcpb_pb2.ChangeDataRequest) -> cdcpb_pb2.ChangeDataRequest:
    req.extra_op = 1  # ExtraOp::ReadOldValue
    return req


def first_error(msgs) -> cdcpb_pb2.Event.Error | None:
    return next((e.error for e in events(msgs) if e.HasField("error")), None)


def until_rows(stream: Stream, count: int, timeout: float = 10.0) -> list[cdcpb_pb2.Event.Row]:
    """Row entries (INITIALIZED excluded) until `count` of them arrived."""
    seen: list[cdcpb_pb2.Event.Row] = []

    def enough(msg) -> bool:
        seen.extend(r for r in rows([msg]) if r.type != T.INITIALIZED)
        return len(seen) >= count

    stream.collect_until(enough, timeout)
    return seen


def resolved_values(stream: Stream, count: int, timeout: float = 10.0) -> list[cdcpb_pb2.ResolvedTs]:
    out: list[cdcpb_pb2.ResolvedTs] = []

    def enough(msg) -> bool:
        if has_resolved(msg):
            out.append(msg.resolved_ts)
        return len(out) >= count

    stream.collect_until(enough, timeout)
    return out


@pytest.fixture
def cluster():
    c = MiniCluster(min_ts_interval_s=0.1)
    yield c
    c.close()


@pytest.fixture
def feed(cluster):
    streams = []

    def open_one(store_id: int = 1, options=()) -> Stream:
        s = Stream(cluster.addresses[store_id], v2=False, options=options)
        streams.append(s)
        return s

    yield open_one
    for s in streams:
        s.close()


def test_cdc_basic(cluster, feed):
    """Initialized on an empty region; a prewrite, resolved ts advancing on its own, the commit; a
    split fails the subscription with epoch_not_match; subscribing again works; a zero epoch is
    epoch_not_match."""
    stream = feed()
    region = cluster.region_of(b"xkey1")
    stream.send(request(region))
    msgs = stream.collect_until(has_initialized)
    assert [r.type for r in rows(msgs)] == [T.INITIALIZED]
    start, _ = cluster.write({b"xkey1": b"value"}, commit=False)
    assert [(r.type, r.key) for r in until_rows(stream, 1)] == [(T.PREWRITE, b"xkey1")]
    assert all(r.ts for r in resolved_values(stream, 6))
    commit = cluster.tso.next()
    cluster.mvcc.commit([b"xkey1"], start, commit)
    (row,) = until_rows(stream, 1)
    assert (row.type, row.start_ts, row.commit_ts) == (T.COMMIT, start, commit)

    cluster.regions.split(region.id, encode_bytes(b"xkey2"))
    error = first_error(stream.collect_until(has_error))
    assert error.HasField("epoch_not_match")
    again = feed()
    again.send(request(cluster.region_of(b"xkey1")))
    assert has_initialized(again.collect_until(has_initialized)[-1])
    stale = request(cluster.region_of(b"xkey1"))
    stale.region_epoch.Clear()
    third = feed()
    third.send(stale)
    assert first_error(third.collect_until(has_error)).HasField("epoch_not_match")


def test_cdc_not_leader():
    """After a leader transfer the old leader's subscription ends with not_leader naming the new
    leader, and subscribing there again is refused the same way."""
    cluster = MiniCluster(n_stores=3, min_ts_interval_s=0.1)
    try:
        region = cluster.region_of(b"")
        old = region.leader_store_id
        stream = Stream(cluster.addresses[old], v2=False)
        stream.send(request(region))
        stream.collect_until(has_initialized)
        new = next(s for _, s in region.peers if s != old)
        cluster.regions.transfer_leader(region.id, new)
        error = first_error(stream.collect_until(has_error))
        assert error.HasField("not_leader") and error.not_leader.leader.store_id == new
        stream.send(request(cluster.region_of(b"")))
        error = first_error(stream.collect_until(has_error))
        assert error.HasField("not_leader") and error.not_leader.leader.store_id == new
        stream.close()
    finally:
        cluster.close()


def test_cdc_cluster_id_mismatch(cluster, feed):
    """From TiCDC 5.3.0 on a request for another cluster id is refused; older versions are not checked."""
    region = cluster.region_of(b"")
    checked = feed()
    checked.send(request(region, version="5.3.0", cluster_id=cluster.cluster_id + 1))
    assert first_error(checked.collect_until(has_error)).HasField("cluster_id_mismatch")
    old = feed()
    old.send(request(region, version="4.0.8", cluster_id=cluster.cluster_id + 1))
    assert has_initialized(old.collect_until(has_initialized)[-1])


def test_cdc_stale_epoch_after_region_ready(cluster, feed):
    """With the region already subscribed, a second stream with a zero epoch gets epoch_not_match,
    and with the current epoch is initialized."""
    region = cluster.region_of(b"")
    first = feed()
    first.send(request(region))
    first.collect_until(has_initialized)
    second = feed()
    stale = request(region)
    stale.region_epoch.Clear()
    second.send(stale)
    assert first_error(second.collect_until(has_error)).HasField("epoch_not_match")
    second.send(request(region))
    assert has_initialized(second.collect_until(has_initialized)[-1])


def test_cdc_scan(cluster, feed):
    """The incremental scan sends a key's lock and its committed version, then INITIALIZED; from a
    checkpoint it sends only what committed after it (and the lock of a pending delete)."""
    key, value = b"xkey1", b"value"
    start1, commit1 = cluster.write({key: value})
    start2, _ = cluster.write({key: value}, commit=False)
    stream = feed()
    stream.send(request(cluster.region_of(key)))
    scanned = rows(stream.collect_until(has_initialized))
    assert [(r.type, r.start_ts, r.commit_ts, r.key, r.value) for r in scanned] == [
        (T.PREWRITE, start2, 0, key, value), (T.COMMITTED, start1, commit1, key, value), (T.INITIALIZED, 0, 0, b"", b"")]

    checkpoint = cluster.tso.next()
    commit2 = cluster.tso.next()
    cluster.mvcc.commit([key], start2, commit2)
    start3, _ = cluster.write({key: None}, commit=False)
    again = feed()
    again.send(request(cluster.region_of(key), checkpoint_ts=checkpoint))
    scanned = rows(again.collect_until(has_initialized))
    assert [(r.type, r.op_type, r.start_ts, r.commit_ts, r.value) for r in scanned[:2]] == [
        (T.PREWRITE, OP.DELETE, start3, 0, b""), (T.COMMITTED, OP.PUT, start2, commit2, value)]
    assert scanned[2].type == T.INITIALIZED


def test_region_split(cluster, feed):
    """A split fails the subscription; both halves (the old id keeps the right part) subscribe again
    and the batched resolved ts then names both regions and never goes back."""
    stream = feed()
    region = cluster.region_of(b"")
    stream.send(request(region))
    stream.collect_until(has_initialized)
    cluster.regions.split(region.id, encode_bytes(b"k0"))
    assert first_error(stream.collect_until(has_error)).HasField("epoch_not_match")
    right = cluster.region_of(b"k0")
    assert right.id == region.id  # TiKV derives the right part from the old region
    left = cluster.region_of(b"")
    for reg in (right, left):
        stream.send(request(reg))
        stream.collect_until(has_initialized)
    previous = 0
    for resolved in resolved_values(stream, 6):
        assert sorted(resolved.regions) == sorted([right.id, left.id]) and resolved.ts >= previous
        previous = resolved.ts


def test_duplicate_subscribe(cluster, feed):
    stream = feed()
    req = request(cluster.region_of(b""))
    stream.send(req)
    stream.collect_until(has_initialized)
    stream.send(req)
    assert first_error(stream.collect_until(has_error)).HasField("duplicate_request")


def test_old_value_basic(cluster, feed):
    """Old values of prewrites across insert, rollback, update, lock, delete and a pessimistic delete
    (which reads the old value at its for_update_ts); a rescan gives committed rows their old values."""
    key = b"xk1"
    req = with_old_value(request(cluster.region_of(key)))
    stream = feed()
    stream.send(req)
    stream.collect_until(has_initialized)
    mvcc, tso = cluster.mvcc, cluster.tso
    ts1 = tso.next()
    mvcc.prewrite([("put", key, b"v1")], key, ts1, 3000)  # TiKV's Op::Insert is a put for CDC
    mvcc.commit([key], ts1, tso.next())
    ts3 = tso.next()
    mvcc.prewrite([("put", key, b"v2")], key, ts3, 3000)
    mvcc.rollback([key], ts3)
    ts4 = tso.next()
    mvcc.prewrite([("put", key, b"3" * 5120)], key, ts4, 3000)
    mvcc.commit([key], ts4, tso.next())
    ts6 = tso.next()
    mvcc.prewrite([("lock", key, b"")], key, ts6, 3000)
    mvcc.commit([key], ts6, tso.next())
    ts8 = tso.next()
    mvcc.prewrite([("delete", key, b"")], key, ts8, 3000)
    mvcc.rollback([key], ts8)
    ts9, ts10 = tso.next(), tso.next()
    mvcc.prewrite([("put", key, b"v6")], key, ts10, 3000)
    mvcc.commit([key], ts10, tso.next())
    ts12 = tso.next()
    mvcc.pessimistic_lock([key], key, ts9, ts12, 3000)
    mvcc.prewrite([("delete", key, b"")], key, ts9, 3000, for_update_ts=ts12, pessimistic_keys=frozenset({key}))
    mvcc.commit([key], ts9, tso.next())
    ts14 = tso.next()
    mvcc.prewrite([("put", key, b"v1")], key, ts14, 3000)

    expected = {ts3: b"v1", ts4: b"v1", ts8: b"3" * 5120, ts9: b"v6", ts14: b""}
    received = [r for m in stream.collect_until(lambda m: any(r.start_ts == ts14 for r in rows([m]))) for r in rows([m])]
    got = {r.start_ts: r.old_value for r in received if r.type == T.PREWRITE}
    assert ts6 not in got  # a LOCK mutation is not a row change: TiKV sends nothing for it
    assert {ts: got.get(ts) for ts in expected} == expected

    rescan = feed()
    rescan.send(req)
    scanned = rows(rescan.collect_until(has_initialized))
    by_start = {(r.type, r.start_ts): r.old_value for r in scanned}
    assert by_start[(T.PREWRITE, ts14)] == b""
    assert (by_start[(T.COMMITTED, ts1)], by_start[(T.COMMITTED, ts4)], by_start[(T.COMMITTED, ts9)]) == (
        b"", b"v1", b"v6")


def test_old_value_multi_changefeeds(cluster, feed):
    """Two subscriptions of one region, one asking for old values and one not: TiKV's delegate reads
    old values once for the region and both get them on their prewrites."""
    key = b"xk1"
    asks, plain = feed(), feed()
    asks.send(with_old_value(request(cluster.region_of(key))))
    plain.send(request(cluster.region_of(key)))
    for s in (asks, plain):
        s.collect_until(has_initialized)
    ts1, _ = cluster.write({key: b"v1"})
    ts3, _ = cluster.write({key: b"3" * 5120})
    for s in (asks, plain):
        prewrites = {r.start_ts: r.old_value for r in until_rows(s, 4) if r.type == T.PREWRITE}
        assert prewrites == {ts1: b"", ts3: b"v1"}


def test_old_value_1pc(cluster, feed):
    """A 1PC commit over an existing key carries the key's previous value as its old value."""
    key = b"xk1"
    stream = feed()
    stream.send(with_old_value(request(cluster.region_of(key))))
    stream.collect_until(has_initialized)
    cluster.mvcc.prewrite([("put", key, b"v1")], key, 10, 3000)
    cluster.mvcc.commit([key], 10, 15)
    cluster.mvcc.commit_one_pc([("put", key, b"v2")], 20, cluster.tso.next())
    row = next(r for r in until_rows(stream, 3) if r.type == T.COMMITTED and r.start_ts == 20)
    assert row.old_value == b"v1"


def test_cdc_1pc(cluster, feed):
    """A 1PC transaction reaches the feed as COMMITTED rows only, above every resolved ts sent before."""
    stream = feed()
    stream.send(request(cluster.region_of(b"")))
    stream.collect_until(has_initialized)
    start = cluster.tso.next()
    resolved_before = max(r.ts for r in resolved_values(stream, 3))
    commit = cluster.mvcc.commit_one_pc([("put", b"xk1", b"v1"), ("put", b"xk2", bytes(512))], start,
                                        cluster.tso.next())
    got = sorted(until_rows(stream, 2), key=lambda r: r.key)
    assert [(r.type, r.key, r.value, r.commit_ts) for r in got] == [
        (T.COMMITTED, b"xk1", b"v1", commit), (T.COMMITTED, b"xk2", bytes(512), commit)]
    assert commit > resolved_before


def test_cdc_batch_size_limit(cluster, feed):
    """An incremental scan sends a 6 MiB row alone in its event; the next key and INITIALIZED follow
    in later events (TiKV caps scan events by size; the simulator at 32 KiB of rows)."""
    cluster.write({b"xk1": bytes(6 * 1024 * 1024), b"xk2": b"v2"})
    stream = feed(options=[("grpc.max_receive_message_length", 64 << 20)])  # TiCDC's client allows 128 MiB
    stream.send(request(cluster.region_of(b"xk1")))
    msgs = [m for m in stream.collect_until(has_initialized, timeout=20) if m.events]
    first = rows(msgs[:1])
    assert [(r.type, r.key) for r in first] == [(T.COMMITTED, b"xk1")]
    assert [(r.type, r.key) for r in rows(msgs[1:])] == [(T.COMMITTED, b"xk2"), (T.INITIALIZED, b"")]


def test_verify_overlapped_write_skips_cf_write(cluster, feed):
    """A transaction whose start ts equals an earlier commit ts of the same key (an overlapped
    write) rolls that secondary back: the feed shows its prewrite and rollback, and the earlier
    committed value stays."""
    key, primary = b"test_key", b"primary_key"
    stream = feed()
    stream.send(request(cluster.region_of(key)))
    stream.collect_until(has_initialized)
    t1_start, t1_commit = cluster.write({key: b"value1"})
    cluster.mvcc.prewrite([("put", primary, b"value2"), ("put", key, b"value2")], primary, t1_commit, 3000)
    cluster.mvcc.rollback([key], t1_commit)
    got = [(r.type, r.key, r.start_ts) for r in until_rows(stream, 5)]
    assert got[:2] == [(T.PREWRITE, key, t1_start), (T.COMMIT, key, t1_start)]
    assert sorted(got[2:4]) == sorted([(T.PREWRITE, primary, t1_commit), (T.PREWRITE, key, t1_commit)])
    assert got[4] == (T.ROLLBACK, key, t1_commit)
    assert cluster.mvcc.get(key, cluster.tso.next(), resolved_locks=(t1_commit,)) == b"value1"


def test_cdc_overlapped_write_bug(cluster, feed):
    """TiKV issue #18498: after the overlapped secondary's rollback (its lock removed, no write
    record), the next transaction on the key prewrites and reaches the feed."""
    key, primary = b"test_key", b"t2_primary"
    _, t1_commit = cluster.write({key: b"value1"})
    stream = feed()
    stream.send(request(cluster.region_of(key)))
    stream.collect_until(has_initialized)
    cluster.mvcc.prewrite([("put", primary, b"value2"), ("put", key, b"value2")], primary, t1_commit, 3000)
    stream.collect_until(lambda m: any(r.type == T.PREWRITE and r.key == key for r in rows([m])))
    cluster.mvcc.rollback([key], t1_commit)
    t3, _ = cluster.write({key: b"value3"}, commit=False)
    got = stream.collect_until(lambda m: any(r.type == T.PREWRITE and r.start_ts == t3 for r in rows([m])))
    assert (T.ROLLBACK, key, t1_commit) in [(r.type, r.key, r.start_ts) for r in rows(got)]


def test_cdc_no_write_corresponding_to_lock(cluster, feed):
    """A lock rolled back without a write record must not hold the resolved ts back."""
    stream = feed()
    key = b"xk1"
    stream.send(with_old_value(request(cluster.region_of(key))))
    stream.collect_until(has_initialized)
    mvcc = cluster.mvcc
    mvcc.prewrite([("put", key, b"v1")], key, 10, 3000)
    mvcc.commit([key], 10, 15)
    mvcc.prewrite([("put", key, b"v2")], key, 15, 3000)
    mvcc.rollback([key], 15)
    mvcc.prewrite([("put", key, b"v3")], key, 20, 3000)
    mvcc.commit([key], 20, 25)
    stream.collect_until(lambda m: has_resolved(m, 25))


def test_cdc_write_rollback_when_no_lock(cluster, feed):
    """A rollback for another start ts leaves the key's lock (and the resolved ts held at it) alone."""
    stream = feed()
    key = b"xk1"
    stream.send(with_old_value(request(cluster.region_of(key))))
    stream.collect_until(has_initialized)
    cluster.mvcc.prewrite([("put", key, b"x" * 16)], key, 10, 3000)
    stream.collect_until(lambda m: has_resolved(m) and m.resolved_ts.ts == 10)
    cluster.mvcc.rollback([key], 5)
    assert all(r.ts <= 10 for r in resolved_values(stream, 5))
    cluster.mvcc.commit([key], 10, 15)
    stream.collect_until(lambda m: has_resolved(m, 16))


def test_prewrite_without_value(cluster, feed):
    """A pessimistic prewrite of a large value is scanned with its value; check_txn_status rewriting
    the lock (min_commit_ts pushed) sends nothing, the commit does."""
    key, value = b"key", b"x" * 512
    cluster.mvcc.pessimistic_lock([key], key, 10, 10, 3000)
    cluster.mvcc.prewrite([("put", key, value)], key, 10, 3000, for_update_ts=10, pessimistic_keys=frozenset({key}))
    stream = feed()
    stream.send(request(cluster.region_of(key)))
    scanned = rows(stream.collect_until(has_initialized))
    assert scanned[0].type == T.PREWRITE and scanned[0].value == value
    cluster.mvcc.check_txn_status(key, 10, 12, 12, rollback_if_not_exist=False)
    cluster.mvcc.commit([key], 10, 14)
    (row,) = until_rows(stream, 1)
    assert (row.type, row.commit_ts) == (T.COMMIT, 14)


def test_cdc_filter_key_range(cluster, feed):
    """Two subscriptions of one region over [key1, key3) and [key2, key4) each see only their keys."""
    region = cluster.region_of(b"key1")
    narrow = {}
    for request_id, (lo, hi) in {13: (b"key1", b"key3"), 24: (b"key2", b"key4")}.items():
        req = request(region, request_id=request_id)
        req.start_key, req.end_key = encode_bytes(lo), encode_bytes(hi)
        narrow[request_id] = feed()
        narrow[request_id].send(req)
        narrow[request_id].collect_until(has_initialized)
    cases = [(b"key1", True, False, True), (b"key1", True, False, False), (b"key2", True, True, True),
             (b"key3", False, True, True), (b"key4", False, False, True)]
    seen: dict[int, list] = {13: [], 24: []}
    for key, _, _, commit in cases:
        start, _ = cluster.write({key: b"value"}, commit=False)
        if commit:
            cluster.mvcc.commit([key], start, cluster.tso.next())
        else:
            cluster.mvcc.rollback([key], start)
    marker = cluster.tso.next()
    for request_id, stream in narrow.items():
        for msg in stream.collect_until(lambda m: has_resolved(m, marker)):
            seen[request_id] += [(r.key, r.type) for r in rows([msg])]
    assert seen[13] == [(b"key1", T.PREWRITE), (b"key1", T.COMMIT), (b"key1", T.PREWRITE), (b"key1", T.ROLLBACK),
                        (b"key2", T.PREWRITE), (b"key2", T.COMMIT)]
    assert seen[24] == [(b"key2", T.PREWRITE), (b"key2", T.COMMIT), (b"key3", T.PREWRITE), (b"key3", T.COMMIT)]


def test_cdc_partial_subscription(cluster):
    """A lock outside the subscribed range [x, z) does not hold that subscription's resolved ts."""
    prewrite_ts, _ = cluster.write({b"key": b"x" * 16}, commit=False)
    checkpoint = cluster.tso.next()
    stream = Stream(cluster.addresses[1])  # TiKV's test uses EventFeedV2 here
    req = register_request(cluster.region_of(b"key"), checkpoint, start=encode_bytes(b"x"), end=encode_bytes(b"z"))
    stream.send(req)
    try:
        stream.collect_until(has_initialized)
        stream.collect_until(lambda m: has_resolved(m, prewrite_ts + 1))
    finally:
        stream.close()


def test_cdc_pessimistic_lock_unlock(cluster):
    """A pessimistic lock taken and released sends no row and holds nothing back."""
    stream = Stream(cluster.addresses[1])
    req = register_request(cluster.region_of(b"key"), cluster.tso.next(), start=encode_bytes(b"a"),
                           end=encode_bytes(b"z"))
    stream.send(req)
    try:
        stream.collect_until(has_initialized)
        start = cluster.tso.next()
        cluster.mvcc.pessimistic_lock([b"key"], b"key", start, start + 10, 3000)
        cluster.mvcc.pessimistic_rollback([b"key"], start, start + 10)
        marker = cluster.tso.next()
        msgs = stream.collect_until(lambda m: has_resolved(m, marker))
        assert rows(msgs) == []
    finally:
        stream.close()


# ---- components/cdc/tests/integrations/test_flow_control.rs -----------------------------------

def test_cdc_congest():
    """With a 1 KiB sink memory quota a 512-byte prewrite gets through and a 2 KiB one fails the
    region with `congested`."""
    cluster = MiniCluster(min_ts_interval_s=0.1, sink_memory_quota_bytes=1024)
    stream = Stream(cluster.addresses[1], v2=False)
    try:
        stream.send(request(cluster.region_of(b"")))
        stream.collect_until(has_initialized)
        cluster.write({b"key1": bytes(512)}, commit=False)
        assert [r.type for r in until_rows(stream, 1)] == [T.PREWRITE]
        cluster.write({b"key2": bytes(2048)}, commit=False)
        assert first_error(stream.collect_until(has_error)).HasField("congested")
    finally:
        stream.close()
        cluster.close()
