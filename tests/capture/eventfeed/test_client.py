import threading
from contextlib import contextmanager

import grpc
import pytest

from tests.capture.puller_fakes import (
    CLUSTER_ID,
    E,
    FakePD,
    PDRegion,
    RecordingSink,
    ScriptedStore,
)
from tidelake.capture.eventfeed.client import EventFeedClient, FeedOptions
from tidelake.capture.puller_errors import IncompatibleClusterError, PrewriteNotMatchError, PullerError
from tidelake.codec.keys import record_key, table_record_span_encoded, to_region_key
from tidelake.kvproto import cdcpb_pb2, errorpb_pb2, kvrpcpb_pb2, metapb_pb2
from tidelake.wait import wait_until

T1, T2 = 70, 71
OPTIONS = FeedOptions(workers=3, backoff_base_s=0.01, backoff_cap_s=0.05, probe_timeout_s=5)


class Script:
    """Every request is recorded; by default a region initializes at once (empty scan)."""

    def __init__(self, initialize=True):
        self.seen = []  # (store, conn, request)
        self.cond = threading.Condition()
        self.initialize = initialize
        self.hook = None

    def __call__(self, store, conn, request):
        with self.cond:
            self.seen.append((store, conn, request))
            self.cond.notify_all()
        if self.hook is not None and self.hook(store, conn, request):
            return
        if self.initialize:
            conn.entries(request, E.Row(type=E.INITIALIZED))

    def wait_count(self, n, timeout_s=10.0):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.seen) >= n, timeout_s), f"only {len(self.seen)} requests"
            return list(self.seen)


def row(kind, table, handle, start_ts, commit_ts=0, value=b"v", op=E.Row.PUT):
    return E.Row(type=kind, start_ts=start_ts, commit_ts=commit_ts, key=record_key(table, handle), value=value,
                 op_type=op)


@pytest.fixture
def cluster():
    made = []

    def make(regions, n_stores=1, multiplexing=True, versions=None, initialize=True):
        script = Script(initialize)
        stores = {i: ScriptedStore(i, script, multiplexing) for i in range(1, n_stores + 1)}
        made.extend(stores.values())
        pd = FakePD({i: s.address for i, s in stores.items()}, regions, versions)
        sink = RecordingSink()
        client = EventFeedClient(pd, sink, OPTIONS)
        made.append(client)
        return script, stores, pd, sink, client

    yield make
    for thing in reversed(made):
        if isinstance(thing, EventFeedClient):
            thing.close()
        else:
            thing.stop()


def whole_table(rid=1, store=1, version=1):
    return PDRegion(rid, b"", b"", version, store)  # one region wider than the table span


def split_key(table, handle):
    return to_region_key(record_key(table, handle))


def test_request_fields_and_multiplexed_routing(cluster):
    span1, span2 = table_record_span_encoded(T1), table_record_span_encoded(T2)
    regions = [PDRegion(1, b"", span2[0], 1, 1), PDRegion(2, span2[0], b"", 1, 1)]
    script, stores, pd, sink, client = cluster(regions)
    client.start()
    sub1 = client.subscribe(T1, span1, 100)
    sub2 = client.subscribe(T2, span2, 200)
    seen = script.wait_count(2)
    by_sub = {req.request_id: (conn, req) for _, conn, req in seen}
    conn1, req1 = by_sub[sub1]
    conn2, req2 = by_sub[sub2]
    assert conn1 is conn2 and conn1.method == "EventFeedV2" and conn1.multiplexed
    assert (req1.region_id, req1.start_key, req1.end_key, req1.checkpoint_ts) == (1, span1[0], span1[1], 100)
    assert (req2.region_id, req2.start_key, req2.end_key, req2.checkpoint_ts) == (2, span2[0], span2[1], 200)
    assert req1.header.cluster_id == CLUSTER_ID and req1.header.ticdc_version == "8.5.0"
    assert req1.extra_op == kvrpcpb_pb2.ReadOldValue and req1.region_epoch.version == 1
    assert req1.WhichOneof("request") is None  # unset oneof = Register (docs/wire.md#request-it-sends)
    assert stores[1].probes == 1

    conn1.entries(req1, row(E.PREWRITE, T1, 1, 150, value=b"a"))
    conn1.entries(req2, row(E.COMMITTED, T2, 9, 210, 220, b"b"))
    conn1.entries(req1, row(E.COMMIT, T1, 1, 150, 160))
    sink.wait_for(lambda s: len(s.rows) == 2)
    assert sorted((r.table_id, r.commit_ts, r.value, r.region_id) for r in sink.rows) == [
        (T1, 160, b"a", 1), (T2, 220, b"b", 2)
    ]
    conn1.resolved(sub1, [1, 2], 300)  # region 2 under sub1 is unknown: ignored
    sink.wait_for(lambda s: (T1, 300) in s.table_resolved)
    assert all(t == T1 for t, _ in sink.table_resolved)
    assert client.table_resolved_ts(sub2) == 200


def test_fallback_to_one_plain_stream_per_subscription(cluster):
    span1, span2 = table_record_span_encoded(T1), table_record_span_encoded(T2)
    script, stores, pd, sink, client = cluster([PDRegion(5, b"", b"", 3, 1)], multiplexing=False)
    client.start()
    sub1 = client.subscribe(T1, span1, 10)
    sub2 = client.subscribe(T2, span2, 10)
    seen = script.wait_count(2)
    conns = {req.request_id: conn for _, conn, req in seen}
    assert conns[sub1] is not conns[sub2]
    assert {c.method for c in conns.values()} == {"EventFeed"}
    for _, conn, req in seen:  # events carry request_id 0: the stream names the subscription
        table = T1 if req.request_id == sub1 else T2
        conn.entries(req, row(E.COMMITTED, table, 1, 20, 30 + table))
        conn.resolved(req.request_id, [5], 500 + table)
    sink.wait_for(lambda s: len(s.table_resolved) == 2)
    assert sorted((r.table_id, r.commit_ts) for r in sink.rows) == [(T1, 30 + T1), (T2, 30 + T2)]
    assert sorted(sink.table_resolved) == [(T1, 500 + T1), (T2, 500 + T2)]


def test_table_resolved_is_min_over_regions_and_only_reported_when_rising(cluster):
    span = table_record_span_encoded(T1)
    mid = split_key(T1, 1000)
    script, stores, pd, sink, client = cluster([PDRegion(1, b"", mid, 1, 1), PDRegion(2, mid, b"", 1, 1)])
    client.start()
    sub = client.subscribe(T1, span, 100)
    seen = script.wait_count(2)
    conn = seen[0][1]
    conn.resolved(sub, [1], 400)
    sink.wait_for(lambda s: len(s.resolved) == 1)
    assert sink.table_resolved == []  # region 2 never resolved: table stays at its start ts
    conn.resolved(sub, [2], 300)
    sink.wait_for(lambda s: s.table_resolved == [(T1, 300)])
    conn.resolved(sub, [2], 250)  # lower: ignored
    conn.resolved(sub, [1, 2], 350)  # region 1 lowers? no: ignored there, region 2 -> 350
    sink.wait_for(lambda s: s.table_resolved == [(T1, 300), (T1, 350)])


def test_not_leader_goes_to_named_leader_with_resolved_checkpoint(cluster):
    span = table_record_span_encoded(T1)
    script, stores, pd, sink, client = cluster([whole_table()], n_stores=2)
    client.start()
    sub = client.subscribe(T1, span, 100)
    (_, conn, req), = script.wait_count(1)
    conn.resolved(sub, [1], 180)
    sink.wait_for(lambda s: s.table_resolved == [(T1, 180)])
    conn.error(req, not_leader=errorpb_pb2.NotLeader(region_id=1, leader=metapb_pb2.Peer(id=102, store_id=2)))
    seen = script.wait_count(2)
    store, conn2, req2 = seen[1]
    assert store.store_id == 2 and req2.region_id == 1 and req2.checkpoint_ts == 180
    assert pd.scans == 1  # the named leader was used without asking PD
    conn.resolved(sub, [1], 999)  # the old store's subscription is gone: dropped
    conn2.entries(req2, row(E.COMMITTED, T1, 1, 181, 190))
    conn2.resolved(sub, [1], 200)
    sink.wait_for(lambda s: s.table_resolved[-1] == (T1, 200))
    assert [r.commit_ts for r in sink.rows] == [190]


def test_not_leader_without_leader_divides_again(cluster):
    span = table_record_span_encoded(T1)
    script, stores, pd, sink, client = cluster([whole_table()], n_stores=2)
    client.start()
    client.subscribe(T1, span, 100)
    (_, conn, req), = script.wait_count(1)
    pd.regions[0].leader_store = 2
    conn.error(req, not_leader=errorpb_pb2.NotLeader(region_id=1))
    store, _, req2 = script.wait_count(2)[1]
    assert store.store_id == 2 and pd.scans == 2 and req2.checkpoint_ts == 100


def test_epoch_not_match_rescans_and_each_piece_resumes_from_its_own_resolved_ts(cluster):
    span = table_record_span_encoded(T1)
    k1, k2 = split_key(T1, 100), split_key(T1, 200)
    regions = [PDRegion(1, b"", k1, 1, 1), PDRegion(2, k1, b"", 1, 1)]
    script, stores, pd, sink, client = cluster(regions)
    client.start()
    sub = client.subscribe(T1, span, 100)
    seen = script.wait_count(2)
    conn = seen[0][1]
    reqs = {r.region_id: r for _, _, r in seen}
    conn.resolved(sub, [1], 300)
    conn.resolved(sub, [2], 200)
    sink.wait_for(lambda s: s.table_resolved == [(T1, 200)])
    # region 2 splits at k2 into 2 [k1, k2) and 3 [k2, +inf); then regions 1 and 2 merge into 4
    pd.regions[1:] = [PDRegion(2, k1, k2, 2, 1), PDRegion(3, k2, b"", 2, 1)]
    conn.error(reqs[2], epoch_not_match=errorpb_pb2.EpochNotMatch())
    seen = script.wait_count(4)
    new = {r.region_id: r for _, _, r in seen[2:]}
    assert {(rid, r.start_key, r.end_key, r.checkpoint_ts) for rid, r in new.items()} == {
        (2, k1, k2, 200), (3, k2, span[1], 200)
    }
    conn.resolved(sub, [2], 400)
    conn.resolved(sub, [3], 500)
    sink.wait_for(lambda s: s.table_resolved[-1] == (T1, 300))
    pd.regions[:] = [PDRegion(4, b"", k2, 3, 1), PDRegion(3, k2, b"", 2, 1)]
    conn.error(reqs[1], region_not_found=errorpb_pb2.RegionNotFound(region_id=1))
    conn.error(new[2], epoch_not_match=errorpb_pb2.EpochNotMatch())
    merged = script.wait_count(5)[4][2]
    # the merged region starts from the lower of the two pieces it covers
    assert (merged.region_id, merged.start_key, merged.end_key, merged.checkpoint_ts) == (4, span[0], k2, 300)
    wait_until(lambda: client.region_count(sub) == 2, 10, "two regions")
    assert len(script.seen) == 5


def test_server_is_busy_and_congested_retry_the_same_region(cluster):
    span = table_record_span_encoded(T1)
    script, stores, pd, sink, client = cluster([whole_table()])
    client.start()
    client.subscribe(T1, span, 100)
    (_, conn, req), = script.wait_count(1)
    conn.error(req, server_is_busy=errorpb_pb2.ServerIsBusy(reason="too many pending incremental scans",
                                                            backoff_ms=20))
    _, conn2, req2 = script.wait_count(2)[1]
    conn2.error(req2, congested=cdcpb_pb2.Congested(region_id=1))
    script.wait_count(3)
    assert pd.scans == 1 and all(r.region_id == 1 for _, _, r in script.seen)


def test_broken_stream_resubscribes_every_region_from_its_resolved_ts(cluster):
    span = table_record_span_encoded(T1)
    mid = split_key(T1, 1000)
    script, stores, pd, sink, client = cluster([PDRegion(1, b"", mid, 1, 1), PDRegion(2, mid, b"", 1, 1)])
    client.start()
    sub = client.subscribe(T1, span, 100)
    seen = script.wait_count(2)
    conn = seen[0][1]
    conn.resolved(sub, [1], 150)
    conn.resolved(sub, [2], 170)
    sink.wait_for(lambda s: s.table_resolved == [(T1, 150)])
    conn.abort(grpc.StatusCode.UNAVAILABLE)
    seen = script.wait_count(4)
    assert {(r.region_id, r.checkpoint_ts) for _, _, r in seen[2:]} == {(1, 150), (2, 170)}
    assert seen[2][1] is not conn and stores[1].probes == 2  # a new stream after a new probe


@pytest.mark.parametrize(
    ("fields", "error_type", "message"),
    [
        ({"duplicate_request": cdcpb_pb2.DuplicateRequest(region_id=1)}, PullerError, "duplicate request"),
        ({"compatibility": cdcpb_pb2.Compatibility(required_version="6.2.0")}, IncompatibleClusterError, "6.2.0"),
        ({"cluster_id_mismatch": cdcpb_pb2.ClusterIDMismatch(current=7, request=CLUSTER_ID)},
         IncompatibleClusterError, "belongs to cluster 7"),
    ],
)
def test_fatal_region_errors_stop_the_feed(cluster, fields, error_type, message):
    script, stores, pd, sink, client = cluster([whole_table()])
    client.start()
    client.subscribe(T1, table_record_span_encoded(T1), 100)
    (_, conn, req), = script.wait_count(1)
    conn.error(req, **fields)
    with pytest.raises(error_type, match=message):
        client.wait(10)


def test_commit_without_prewrite_after_initialized_stops_the_feed(cluster):
    script, stores, pd, sink, client = cluster([whole_table()])
    client.start()
    client.subscribe(T1, table_record_span_encoded(T1), 100)
    (_, conn, req), = script.wait_count(1)
    conn.entries(req, row(E.COMMIT, T1, 5, 110, 120))
    with pytest.raises(PrewriteNotMatchError, match="region 1"):
        client.wait(10)


def test_incompatible_store_version_is_refused_at_start(cluster):
    script, stores, pd, sink, client = cluster([whole_table()], versions={1: "6.5.3"})
    with pytest.raises(IncompatibleClusterError, match=r"store 1 .* 6\.5\.3.*\[7\.1\.0-alpha, 10\.0\.0\)"):
        client.start()


def test_unsubscribe_deregisters_on_the_multiplexed_stream(cluster):
    script, stores, pd, sink, client = cluster([whole_table()])
    client.start()
    sub = client.subscribe(T1, table_record_span_encoded(T1), 100)
    (_, conn, req), = script.wait_count(1)
    client.unsubscribe(sub)
    last = script.wait_count(2)[1][2]
    assert last.request_id == sub and last.WhichOneof("request") == "deregister" and last.region_id == 0
    conn.entries(req, row(E.COMMITTED, T1, 1, 110, 120))
    conn.resolved(sub, [1], 500)
    assert not client.wait(0.3) and sink.rows == [] and sink.table_resolved == []


@pytest.mark.parametrize("multiplexing", [True, False])
def test_stream_given_up_after_a_handler_failure_is_cancelled(multiplexing):
    """A stream the client stops reading must be cancelled, or TiKV keeps its subscriptions and
    buffers for nobody until its sink quota congests the region for the live subscription too."""
    from tidelake.capture.eventfeed.store_stream import StoreStream

    class FailingHandler:
        def __init__(self):
            self.broken = threading.Event()

        def on_entries(self, token, rows):
            raise RuntimeError("handler failed")

        def on_resolved(self, tokens, ts):
            pass

        def on_error(self, token, error):
            pass

        def on_broken(self, tokens, reason):
            self.broken.set()

    store = ScriptedStore(1, lambda s, conn, request: conn.entries(request, E.Row(type=E.INITIALIZED)), multiplexing)
    channel = grpc.insecure_channel(store.address)
    handler = FailingHandler()
    try:
        stream = StoreStream(1, channel, handler, probe_timeout_s=5)
        request = cdcpb_pb2.ChangeDataRequest(region_id=1, request_id=7)
        stream.register("token", request)
        call = stream._calls[None if multiplexing else 7]
        assert handler.broken.wait(5)
        wait_until(call.call.done, 10, "the call to end")
    finally:
        channel.close()
        store.stop()


@contextmanager
def two_regions_on_one_stream(handler, multiplexing: bool):
    """A StoreStream to a scripted store with regions 1 ("a") and 2 ("b") registered under request
    id 7, `handler` receiving their events: the store's connection and first request."""
    from tidelake.capture.eventfeed.store_stream import StoreStream

    conns = []
    store = ScriptedStore(1, lambda s, conn, request: conns.append((conn, request)), multiplexing)
    channel = grpc.insecure_channel(store.address)
    try:
        stream = StoreStream(1, channel, handler, probe_timeout_s=5)
        stream.register("a", cdcpb_pb2.ChangeDataRequest(region_id=1, request_id=7))
        stream.register("b", cdcpb_pb2.ChangeDataRequest(region_id=2, request_id=7))
        wait_until(lambda: len(conns) == 2, 10, "both registrations")
        yield conns[0]
    finally:
        channel.close()
        store.stop()


@pytest.mark.parametrize("multiplexing", [True, False])
def test_a_regions_entries_events_of_one_response_reach_the_handler_in_one_call_in_order(multiplexing):
    """Small events cost a handler call and a worker hand-off each (bench_puller's profile): one
    response's Entries events of a region are handed over together, each its own list, and a
    region's error still comes after the rows sent before it."""

    class RecordingHandler:
        def __init__(self):
            self.calls = []
            self.done = threading.Event()

        def on_entries(self, token, events):
            self.calls.append((token, "entries", [[r.start_ts for r in rows] for rows in events]))

        def on_resolved(self, tokens, ts):
            pass

        def on_error(self, token, error):
            self.calls.append((token, "error", []))

        def on_broken(self, tokens, reason):
            pass

    handler = RecordingHandler()
    with two_regions_on_one_stream(handler, multiplexing) as (conn, request):
        rid = conn.rid(request)
        response = cdcpb_pb2.ChangeDataEvent()
        for region, start_ts in ((1, 1), (2, 2), (1, 3), (1, 0), (2, 4), (1, 5)):
            event = response.events.add(region_id=region, request_id=rid)
            if start_ts:
                event.entries.entries.add(type=E.PREWRITE, start_ts=start_ts, key=record_key(T1, start_ts))
            else:
                event.error.congested.region_id = region  # region 1's rows after it are not routed
        conn.send(response)
        wait_until(lambda: len(handler.calls) >= 3, 10, "the response routed")
        assert handler.calls == [("a", "entries", [[1], [3]]), ("a", "error", []), ("b", "entries", [[2], [4]])]


@pytest.mark.parametrize("multiplexing", [True, False])
def test_a_handler_failing_on_one_error_leaves_the_next_errors_region_to_on_broken(multiplexing):
    """A response of two regions' errors whose first handler call raises: the second region's
    subscription is still the stream's to give up, so on_broken names it (none is lost unretried)."""

    class FailingOnError:
        def __init__(self):
            self.broken: list = []
            self.done = threading.Event()

        def on_entries(self, token, events):
            pass

        def on_resolved(self, tokens, ts):
            pass

        def on_error(self, token, error):
            raise RuntimeError(f"handler failed on {token}")

        def on_broken(self, tokens, reason):
            self.broken.extend(tokens)
            self.done.set()

    handler = FailingOnError()
    with two_regions_on_one_stream(handler, multiplexing) as (conn, request):
        response = cdcpb_pb2.ChangeDataEvent()
        for region in (1, 2):
            response.events.add(region_id=region, request_id=conn.rid(request)).error.congested.region_id = region
        conn.send(response)
        assert handler.done.wait(5)
        assert handler.broken == ["b"]


class CallSink(RecordingSink):
    """Records each on_rows call's commit ts, to see how rows were batched."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = []

    def on_rows(self, rows) -> None:
        self.calls.append([r.commit_ts for r in rows])
        super().on_rows(rows)


def _region_feed(client_state):
    from types import SimpleNamespace

    return SimpleNamespace(state=client_state)


def _initialized_state():
    from tidelake.capture.eventfeed.region_state import RegionFeedState

    state = RegionFeedState(1, 1, table_record_span_encoded(T1), table_start_ts=10, checkpoint_ts=10)
    state.handle_rows([E.Row(type=E.INITIALIZED)])
    return state


def _committed_event(handles, start_ts):
    prewrites = [row(E.PREWRITE, T1, h, start_ts, value=b"v%d" % h) for h in handles]
    return prewrites + [row(E.COMMIT, T1, h, start_ts, start_ts + 1) for h in handles]


def test_a_hand_offs_committed_rows_reach_the_sink_in_bounded_batches_in_order():
    """One sink call per small event was most of the lander's cost (bench_puller's profile): a
    hand-off's events go to the sink in calls of SINK_BATCH_ROWS rows, more only when one event
    completes more, every row once and in order."""
    from tidelake.capture.eventfeed.client import SINK_BATCH_ROWS

    sink = CallSink()
    client = EventFeedClient(FakePD({}, []), sink, OPTIONS)
    try:
        feed = _region_feed(_initialized_state())
        events = [_committed_event([i], 100 + 2 * i) for i in range(2 * SINK_BATCH_ROWS + 100)]
        big = 3 * SINK_BATCH_ROWS // 2  # one event completing more than a batch stays whole
        events.append(_committed_event(range(10_000, 10_000 + big), 100_000))
        client._on_entries(feed, events)
        assert [len(c) for c in sink.calls] == [SINK_BATCH_ROWS, SINK_BATCH_ROWS, 100 + big]
        assert [r.commit_ts for r in sink.rows] == [101 + 2 * i for i in range(2 * SINK_BATCH_ROWS + 100)] + [
            100_001] * big
        assert sink.rows[0].value == b"v0" and sink.rows[-1].value == b"v%d" % (10_000 + big - 1)
    finally:
        client.close()


def test_rows_completed_before_a_failing_event_still_reach_the_sink():
    """An event that breaks the protocol fails the feed; the rows of the events before it were
    completed and are delivered first, as when each event had its own sink call."""
    sink = CallSink()
    client = EventFeedClient(FakePD({}, []), sink, OPTIONS)
    try:
        feed = _region_feed(_initialized_state())
        events = [_committed_event([1], 100), _committed_event([2], 102), [row(E.COMMIT, T1, 3, 104, 105)]]
        with pytest.raises(PrewriteNotMatchError):
            client._on_entries(feed, events)
        assert sink.calls == [[101, 103]]
    finally:
        client.close()


def test_a_failing_event_fails_the_feed_with_its_own_error_even_when_the_sink_fails_too():
    class FailingSink(CallSink):
        def on_rows(self, rows) -> None:
            raise RuntimeError("sink failed")

    client = EventFeedClient(FakePD({}, []), FailingSink(), OPTIONS)
    try:
        feed = _region_feed(_initialized_state())
        with pytest.raises(PrewriteNotMatchError):
            client._on_entries(feed, [_committed_event([1], 100), [row(E.COMMIT, T1, 3, 104, 105)]])
    finally:
        client.close()
