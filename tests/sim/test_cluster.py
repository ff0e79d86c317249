"""SimCluster: info files, size-based auto split, GC honouring the minimum service safepoint."""

from __future__ import annotations

import time

import grpc
import pytest

from tidelake.codec.keys import record_key, table_split_key
from tidelake.errors import InputError
from tidelake.kvproto import pdpb_pb2, pdpb_pb2_grpc
from tidelake.sim.cluster import SimCluster
from tidelake.sim.mvcc import MAX_TS
from tidelake.tso import compose, physical_ms


def put_rows(cluster: SimCluster, table_id: int, handles: range, value: bytes) -> int:
    keys = [record_key(table_id, h) for h in handles]
    start = cluster.tso.next()
    cluster.mvcc.prewrite([("put", k, value) for k in keys], keys[0], start, 3000)
    commit = cluster.tso.next()
    cluster.mvcc.commit(keys, start, commit)
    return commit


def test_info_file_round_trip(sim_cluster, tmp_path):
    path = tmp_path / "sim.json"
    sim_cluster.write_info(path)
    info = SimCluster.read_info(path)
    assert info == {"pd": [sim_cluster.pd_address], "stores": sim_cluster.store_addresses,
                    "cluster_id": sim_cluster.cluster_id}
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError):
        SimCluster.read_info(tmp_path / "bad.json")


def test_split_checker_splits_big_regions_inside_a_table(sim_cluster):
    sim_cluster.region_max_keys = 40
    sim_cluster.split_table(100)
    put_rows(sim_cluster, 100, range(200), b"v")
    while sim_cluster.check_splits():
        pass
    regions = sim_cluster.regions.scan(table_split_key(100), b"")
    assert len(regions) >= 5
    for region in regions:
        lo, hi = region.raw_range()
        assert sim_cluster.mvcc.approximate_stats(lo, hi)[0] <= 40
    assert [r.end_key for r in regions[:-1]] == [r.start_key for r in regions[1:]]


def test_background_split_checker_runs():
    with SimCluster(n_stores=1, split_check_interval_s=0.05, gc_interval_s=0, region_max_keys=10,
                    server_workers=4) as cluster:
        put_rows(cluster, 7, range(50), b"v")
        deadline = time.monotonic() + 5
        while len(cluster.regions.all()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(cluster.regions.all()) >= 3


def test_gc_honours_min_service_safepoint_and_resolves_old_locks(sim_cluster):
    sim_cluster.gc_life_time_s = 0  # gc_worker asks for "now"
    key = record_key(100, 1)
    put_rows(sim_cluster, 100, range(1, 2), b"v0")
    v1 = put_rows(sim_cluster, 100, range(1, 2), b"v1")
    between = sim_cluster.tso.next()
    put_rows(sim_cluster, 100, range(1, 2), b"v2")
    orphan_start = compose(physical_ms(sim_cluster.tso.next()) - 60_000)
    orphan = record_key(100, 9)
    sim_cluster.mvcc.prewrite([("put", orphan, b"o")], orphan, orphan_start, 3000)

    channel = grpc.insecure_channel(sim_cluster.pd_address)
    pd = pdpb_pb2_grpc.PDStub(channel)
    header = pdpb_pb2.RequestHeader(cluster_id=sim_cluster.cluster_id)
    resp = pd.UpdateServiceGCSafePoint(pdpb_pb2.UpdateServiceGCSafePointRequest(
        header=header, service_id=b"ticdc-test", TTL=3600, safe_point=between))
    assert resp.min_safe_point <= between

    # v0 goes (v1 is the newest version <= the safepoint), and so does the rollback record written
    # when GC rolled back the orphan lock, since it lies below the safepoint too.
    assert sim_cluster.run_gc_once() == 2
    assert pd.GetGCSafePoint(pdpb_pb2.GetGCSafePointRequest(header=header)).safe_point == between
    assert sim_cluster.mvcc.get(key, between) == b"v1" and sim_cluster.mvcc.get(key, v1 - 1) is None
    assert sim_cluster.mvcc.scan_locks(b"", b"", MAX_TS) == []  # the orphan lock below it was rolled back
    assert sim_cluster.mvcc.get(orphan, MAX_TS - 1) is None

    pd.UpdateServiceGCSafePoint(pdpb_pb2.UpdateServiceGCSafePointRequest(
        header=header, service_id=b"ticdc-test", TTL=0, safe_point=2**64 - 1))
    assert sim_cluster.run_gc_once() >= 1
    assert pd.GetGCSafePoint(pdpb_pb2.GetGCSafePointRequest(header=header)).safe_point > between
    assert sim_cluster.mvcc.get(key, between) is None and sim_cluster.mvcc.get(key, MAX_TS - 1) == b"v2"
    channel.close()


def test_stores_listen_on_the_configured_ports_and_restart_there(sim_cluster):
    addresses = dict(sim_cluster.store_addresses)
    sim_cluster.stop_store(3)
    assert not sim_cluster.store_is_up(3)
    sim_cluster.start_store(3)
    assert sim_cluster.store_is_up(3) and sim_cluster.store_addresses == addresses
    with pytest.raises(InputError):
        sim_cluster.stop_store(9)


KEEPALIVE_CLIENT = """
import time, grpc
from tidelake.kvproto import pdpb_pb2, pdpb_pb2_grpc
from tidelake.sim.cluster import SimCluster
with SimCluster(n_stores=1) as sim:
    channel = grpc.insecure_channel(sim.pd_address, options=[
        ("grpc.keepalive_time_ms", 500), ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0)])
    stub = pdpb_pb2_grpc.PDStub(channel)
    stub.GetMembers(pdpb_pb2.GetMembersRequest())
    time.sleep(3)
    stub.GetMembers(pdpb_pb2.GetMembersRequest())
"""


def test_servers_tolerate_client_keepalive_pings_like_tikv():
    """client-go pings every 10 s without data; gRPC's default server answers the third such ping
    with GOAWAY too_many_pings (logged by gRPC core on stderr, so the client runs in a child)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", KEEPALIVE_CLIENT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "too_many_pings" not in done.stderr
