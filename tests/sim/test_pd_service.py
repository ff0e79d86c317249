"""The simulated PD through real gRPC stubs on loopback (docs/wire.md#pdpb-subset, docs/wire.md#pd-server-behaviour; docs/metadata.md#server-semantics)."""

from __future__ import annotations

import threading

import grpc
import pytest

from tidelake.codec.keys import record_key, table_split_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import pdpb_pb2, pdpb_pb2_grpc
from tidelake.sim.gc_safepoints import GcSafePoints
from tidelake.sim.tso_oracle import TsoOracle
from tidelake.tso import compose


@pytest.fixture
def pd(sim_cluster):
    channel = grpc.insecure_channel(sim_cluster.pd_address)
    yield pdpb_pb2_grpc.PDStub(channel)
    channel.close()


@pytest.fixture
def header(sim_cluster):
    return pdpb_pb2.RequestHeader(cluster_id=sim_cluster.cluster_id)


def test_members_and_cluster_info_need_no_cluster_id(pd, sim_cluster):
    resp = pd.GetMembers(pdpb_pb2.GetMembersRequest())
    assert resp.header.cluster_id == sim_cluster.cluster_id
    assert list(resp.leader.client_urls) == [f"http://{sim_cluster.pd_address}"]
    assert resp.members[0].member_id == resp.leader.member_id
    info = pd.GetClusterInfo(pdpb_pb2.GetClusterInfoRequest())
    assert list(info.serviceModes) == [pdpb_pb2.PD_SVC_MODE]


def test_cluster_id_mismatch_is_a_grpc_error(pd, sim_cluster):
    bad = pdpb_pb2.RequestHeader(cluster_id=sim_cluster.cluster_id + 1)
    with pytest.raises(grpc.RpcError) as err:
        pd.GetRegion(pdpb_pb2.GetRegionRequest(header=bad, region_key=b""))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.RpcError) as err:
        list(pd.Tso(iter([pdpb_pb2.TsoRequest(header=bad, count=1)])))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_tso_stream_is_monotonic_and_returns_the_largest_of_count(pd, header):
    requests = [pdpb_pb2.TsoRequest(header=header, count=n) for n in (1, 5, 1, 100, 3)]
    responses = list(pd.Tso(iter(requests)))
    assert [r.count for r in responses] == [1, 5, 1, 100, 3]
    previous_last = 0
    for r in responses:
        first = compose(r.timestamp.physical, r.timestamp.logical - r.count + 1)
        last = compose(r.timestamp.physical, r.timestamp.logical)
        assert first > previous_last and last - first == r.count - 1
        previous_last = last
    with pytest.raises(grpc.RpcError) as err:
        list(pd.Tso(iter([pdpb_pb2.TsoRequest(header=header, count=0)])))
    assert "count should be positive" in err.value.details()


def test_tso_oracle_is_strictly_monotonic_across_threads():
    oracle = TsoOracle()
    out: list[list[int]] = [[] for _ in range(4)]

    def take(bucket: list[int]) -> None:
        bucket.extend(oracle.next() for _ in range(2000))

    threads = [threading.Thread(target=take, args=(b,)) for b in out]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged = [ts for bucket in out for ts in bucket]
    assert len(set(merged)) == len(merged) and all(b == sorted(b) for b in out)
    assert oracle.current() == max(merged)


def test_tso_logical_overflow_moves_to_next_millisecond():
    oracle = TsoOracle(clock_ms=lambda: 1000)
    a = oracle.next((1 << 18) - 1)
    b = oracle.next()
    assert a == compose(1000, (1 << 18) - 1) and b == compose(1001, 1)


def test_region_lookups(pd, header, sim_cluster):
    region = sim_cluster.split_table(100)
    key = encode_bytes(record_key(100, 7))
    resp = pd.GetRegion(pdpb_pb2.GetRegionRequest(header=header, region_key=key))
    assert resp.region.id == region.id and resp.region.start_key == table_split_key(100)
    assert resp.leader.store_id == region.leader_store_id
    prev = pd.GetPrevRegion(pdpb_pb2.GetRegionRequest(header=header, region_key=key))
    assert prev.region.end_key == region.start_key
    by_id = pd.GetRegionByID(pdpb_pb2.GetRegionByIDRequest(header=header, region_id=region.id))
    assert by_id.region == resp.region
    missing = pd.GetRegionByID(pdpb_pb2.GetRegionByIDRequest(header=header, region_id=999_999))
    assert not missing.HasField("region") and missing.header.error.type == pdpb_pb2.OK


def test_scan_regions_fills_both_forms(pd, header, sim_cluster):
    for tid in (100, 200, 300):
        sim_cluster.split_table(tid)
    resp = pd.ScanRegions(pdpb_pb2.ScanRegionsRequest(header=header, start_key=table_split_key(150),
                                                      end_key=table_split_key(300), limit=0))
    assert [r.start_key for r in resp.region_metas] == [table_split_key(100), table_split_key(200)]
    assert [r.region for r in resp.regions] == list(resp.region_metas)
    assert [r.leader for r in resp.regions] == list(resp.leaders)
    limited = pd.ScanRegions(pdpb_pb2.ScanRegionsRequest(header=header, start_key=b"", limit=2))
    assert len(limited.regions) == 2


def test_batch_scan_regions_validation_and_dedup(pd, header, sim_cluster):
    for tid in (100, 200):
        sim_cluster.split_table(tid)
    rng = pdpb_pb2.KeyRange
    ok = pd.BatchScanRegions(pdpb_pb2.BatchScanRegionsRequest(header=header, ranges=[
        rng(start_key=table_split_key(100), end_key=encode_bytes(record_key(100, 5))),
        rng(start_key=encode_bytes(record_key(100, 9)), end_key=table_split_key(201))],
        contain_all_key_range=True))
    assert ok.header.error.type == pdpb_pb2.OK
    assert [r.region.start_key for r in ok.regions] == [table_split_key(100), table_split_key(200)]
    overlap = pd.BatchScanRegions(pdpb_pb2.BatchScanRegionsRequest(header=header, ranges=[
        rng(start_key=b"a", end_key=b"c"), rng(start_key=b"b", end_key=b"d")]))
    assert overlap.header.error.type == pdpb_pb2.UNKNOWN and not overlap.regions
    backwards = pd.BatchScanRegions(pdpb_pb2.BatchScanRegionsRequest(header=header, ranges=[
        rng(start_key=b"d", end_key=b"c")]))
    assert backwards.header.error.type == pdpb_pb2.UNKNOWN


def test_stores(pd, header, sim_cluster):
    resp = pd.GetAllStores(pdpb_pb2.GetAllStoresRequest(header=header, exclude_tombstone_stores=True))
    assert {s.id: s.address for s in resp.stores} == sim_cluster.store_addresses
    assert all(s.version == "8.5.0" for s in resp.stores)
    one = pd.GetStore(pdpb_pb2.GetStoreRequest(header=header, store_id=2))
    assert one.store.address == sim_cluster.store_addresses[2]
    unknown = pd.GetStore(pdpb_pb2.GetStoreRequest(header=header, store_id=42))
    assert unknown.header.error.type == pdpb_pb2.UNKNOWN and "invalid store ID 42" in unknown.header.error.message


def test_service_gc_safepoints_follow_classic_pd(pd, header, sim_cluster):
    def update(service: str, ttl: int, sp: int) -> pdpb_pb2.UpdateServiceGCSafePointResponse:
        return pd.UpdateServiceGCSafePoint(pdpb_pb2.UpdateServiceGCSafePointRequest(
            header=header, service_id=service.encode(), TTL=ttl, safe_point=sp))

    assert update("ticdc", 3600, 100).min_safe_point == 0  # gc_worker at 0 is the minimum
    update("gc_worker", 2**63 - 1, 500)
    resp = update("dumpling", 300, 200)
    assert (resp.service_id, resp.min_safe_point) == (b"ticdc", 100)
    assert 3590 <= resp.TTL <= 3600
    assert update("br", 300, 50).min_safe_point == 100  # below the minimum: refused, no error
    assert update("ticdc", 0, 2**64 - 1).min_safe_point == 200  # TTL 0 removes the entry
    assert pd.GetGCSafePoint(pdpb_pb2.GetGCSafePointRequest(header=header)).safe_point == 0


def test_expired_service_safepoints_disappear():
    now = [1000]
    state = GcSafePoints(clock_s=lambda: now[0])
    state.update_service("gc_worker", 2**63 - 1, 50)
    state.update_service("ticdc", 10, 60)
    state.update_service("gc_worker", 2**63 - 1, 500)
    assert state.min_service_safe_point() == 60
    now[0] += 11
    assert state.min_service_safe_point() == 500
    assert state.advance_gc_safe_point(400) == 400 and state.advance_gc_safe_point(300) == 400


def test_min_ts(pd, header, sim_cluster):
    before = sim_cluster.tso.current()
    resp = pd.GetMinTS(pdpb_pb2.GetMinTSRequest(header=header))
    assert compose(resp.timestamp.physical, resp.timestamp.logical) > before
