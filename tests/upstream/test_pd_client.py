"""PDClient against the simulated PD (real gRPC): discovery, failover, TSO, regions, stores, GC."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from pd_members import PdMembers

from tidelake import tso
from tidelake.codec.keys import record_key, table_record_span_encoded, table_split_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import pdpb_pb2, pdpb_pb2_grpc
from tidelake.sim.cluster import SimCluster
from tidelake.sim.pd_service import PdService
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.tso_stream import TsoDispatcher, TsoStreamBroken
from tidelake.upstream.upstream_errors import UpstreamError


def test_discovery_learns_cluster_id_and_leader(sim, pd):
    assert pd.cluster_id == sim.cluster_id
    assert pd.leader_url == sim.pd_address


def test_unreachable_seed_is_skipped(sim):
    with PDClient(["127.0.0.1:1", sim.pd_address], timeout_s=1, retry_timeout_s=5) as client:
        assert client.cluster_id == sim.cluster_id
        assert client.get_ts() > 0


def test_no_reachable_pd_is_a_clear_error():
    with pytest.raises(UpstreamError, match="no PD endpoint answered GetMembers"):
        PDClient(["127.0.0.1:1"], timeout_s=0.5, retry_timeout_s=1)


def test_seeds_of_two_clusters_are_rejected(sim):
    with SimCluster(n_stores=1, cluster_id=sim.cluster_id + 1, split_check_interval_s=0, gc_interval_s=0,
                    server_workers=2) as other:
        with pytest.raises(UpstreamError, match="different clusters"):
            PDClient([sim.pd_address, other.pd_address], retry_timeout_s=2)


def test_tso_is_strictly_increasing_across_threads(pd):
    results: list[list[int]] = [[] for _ in range(6)]

    def worker(out: list[int]) -> None:
        for _ in range(40):
            out.append(pd.get_ts())

    threads = [threading.Thread(target=worker, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [ts for r in results for ts in r]
    assert len(set(everything)) == len(everything)
    for r in results:
        assert r == sorted(r)
    assert tso.lag_seconds(min(everything), max(everything)) < 30


def test_tso_batch_uses_count_semantics():
    """One TsoRequest{count=n} answers n callers with the n TSOs ending at the returned one (docs/wire.md#pd-server-behaviour)."""
    seen_counts: list[int] = []
    physical = 1_700_000_000_000

    def open_stream(requests):
        def responses():
            logical = 100
            for req in requests:
                seen_counts.append(req.count)
                logical += req.count
                stamp = pdpb_pb2.Timestamp(physical=physical, logical=logical)
                yield pdpb_pb2.TsoResponse(count=req.count, timestamp=stamp)

        return responses()

    dispatcher = TsoDispatcher(open_stream, pdpb_pb2.RequestHeader, lambda: None)
    gate = threading.Barrier(8)

    def call():
        gate.wait()
        return dispatcher.get_ts(5)

    with futures.ThreadPoolExecutor(8) as pool:
        got = sorted(pool.map(lambda _: call(), range(8)))
    dispatcher.close()
    assert got == [tso.compose(physical, 101 + i) for i in range(8)]
    assert sum(seen_counts) == 8


def test_regions_by_key_by_id_and_scan(sim, pd):
    for table_id in (100, 101, 102):
        sim.split_table(table_id)
    key = encode_bytes(record_key(101, 5))
    info = pd.get_region(key)
    assert info.region.start_key <= key and (not info.region.end_key or key < info.region.end_key)
    assert info.leader is not None and info.leader.store_id in sim.store_addresses
    by_id = pd.get_region_by_id(info.region.id)
    assert by_id.region == info.region
    assert pd.get_region_by_id(999_999) is None

    regions = pd.scan_regions(table_split_key(100), table_split_key(103))
    assert regions[0].region.start_key == table_split_key(100)
    for left, right in zip(regions, regions[1:]):
        assert left.region.end_key == right.region.start_key
    assert regions[-1].region.end_key == b"" or regions[-1].region.end_key >= table_split_key(103)
    assert all(r.leader is not None for r in regions)
    assert len(pd.scan_regions(b"", b"", limit=2)) == 2


def test_stores(sim, pd):
    stores = pd.get_all_stores()
    assert {s.id: s.address for s in stores} == sim.store_addresses
    assert pd.get_store(2).address == sim.store_addresses[2]
    with pytest.raises(UpstreamError, match="invalid store ID"):
        pd.get_store(77)


def test_gc_safepoint_rpcs(sim, pd):
    ts = pd.get_ts()
    assert pd.update_service_gc_safepoint("tidelake-test", 600, ts - 1) <= ts - 1
    assert any(s.service_id == "tidelake-test" and s.safe_point == ts - 1 for s in sim.gc_safe_points.services())
    assert pd.get_gc_safepoint() == sim.gc_safe_points.gc_safe_point


@pytest.mark.parametrize("old_pd", [False, True])
def test_leader_failover_rediscovers(sim, old_pd):
    switch = PdMembers(sim)
    if old_pd:
        switch.unimplemented.add("GetClusterInfo")  # PD before service modes: plain PD mode (docs/wire.md#pd-server-behaviour)
    servers = []
    for i in range(2):
        server = grpc.server(futures.ThreadPoolExecutor(4))
        pdpb_pb2_grpc.add_PDServicer_to_server(switch.servicer(i), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        switch.urls.append(f"127.0.0.1:{port}")
    try:
        # Seed only the follower: discovery must dial the leader it names.
        switch.leader = 0
        with PDClient([switch.urls[1]], retry_timeout_s=10) as client:
            assert client.leader_url == switch.urls[0]
            first = client.get_ts()
            assert len(client.get_all_stores()) == 3
            switch.leader = 1
            assert len(client.get_all_stores()) == 3
            assert client.leader_url == switch.urls[1]
            second = client.get_ts()
            assert second > first
    finally:
        for server in servers:
            server.stop(None)


def test_hung_tso_stream_is_cancelled_and_reopened():
    opened: list[str] = []

    class Hung:
        def __init__(self):
            self.cancelled = threading.Event()

        def __iter__(self):
            return self

        def __next__(self):
            self.cancelled.wait(10)
            raise RuntimeError("cancelled")

        def cancel(self):
            self.cancelled.set()

    def open_stream(requests):
        if not opened:
            opened.append("hung")
            return Hung()
        opened.append("ok")
        return (pdpb_pb2.TsoResponse(count=r.count, timestamp=pdpb_pb2.Timestamp(physical=5, logical=r.count))
                for r in requests)

    broken: list[bool] = []
    dispatcher = TsoDispatcher(open_stream, pdpb_pb2.RequestHeader, lambda: broken.append(True))
    with pytest.raises(TsoStreamBroken, match="no answer within 0.2s"):
        dispatcher.get_ts(0.2)
    assert dispatcher.get_ts(5) == tso.compose(5, 1)
    dispatcher.close()
    assert opened == ["hung", "ok"] and broken == [True]


def _regions_of(sim, ranges):
    """The simulator's own region map, read directly: what PD must answer."""
    ids = []
    for start, end in ranges:
        ids += [r.id for r in sim.regions.scan(start, end) if r.id not in ids]
    return ids


def test_batch_scan_regions_is_one_request_for_many_ranges(sim, pd):
    for table_id in range(100, 106):
        sim.split_table(table_id)
    ranges = [table_record_span_encoded(t) for t in (100, 102, 104)]
    before = sim.pd_calls.snapshot()
    regions = pd.batch_scan_regions(ranges)
    after = sim.pd_calls.snapshot()
    assert after["BatchScanRegions"] - before.get("BatchScanRegions", 0) == 1
    assert after.get("ScanRegions", 0) == before.get("ScanRegions", 0)
    assert [r.region.id for r in regions] == _regions_of(sim, ranges)
    assert all(r.leader is not None for r in regions)
    assert len(pd.batch_scan_regions(ranges, limit=2)) == 2


def test_batch_scan_regions_falls_back_to_scan_regions_on_an_older_pd(monkeypatch):
    def unimplemented(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found: pdpb.PD/BatchScanRegions")

    monkeypatch.setattr(PdService, "BatchScanRegions", unimplemented)
    with SimCluster(n_stores=1, split_check_interval_s=0, gc_interval_s=0, server_workers=4) as old:
        for table_id in (100, 101, 102):
            old.split_table(table_id)
        ranges = [table_record_span_encoded(100), table_record_span_encoded(102)]
        with PDClient([old.pd_address], retry_timeout_s=5) as client:
            assert [r.region.id for r in client.batch_scan_regions(ranges)] == _regions_of(old, ranges)
            assert [r.region.id for r in client.batch_scan_regions(ranges)] == _regions_of(old, ranges)
        calls = old.pd_calls.snapshot()
    assert calls["BatchScanRegions"] == 1  # asked once, then remembered
    assert calls["ScanRegions"] == 4
