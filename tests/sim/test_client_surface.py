"""What real TiKV clients need besides the unary reads: BatchCommands, gRPC health, forwarding, PD's etcd.

Each batched command must answer exactly as its unary twin (docs/wire.md#batchcommands); health and etcd's
Range are checked through the standard stubs (docs/wire.md#grpc-health, docs/wire.md#pds-etcd-kv).
"""

from __future__ import annotations

import queue
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tidelake.kvproto import etcdserverpb_pb2, etcdserverpb_pb2_grpc, kvrpcpb_pb2, tikvpb_pb2, tikvpb_pb2_grpc
from tidelake.sim.etcd_kv import GC_SAVED_SAFE_POINT_KEY
from tidelake.sim.forwarding import FORWARD_METADATA_KEY

from test_kv_service import channels, commit_rows, ctx, row, table_region  # noqa: F401  (fixtures)

Request = tikvpb_pb2.BatchCommandsRequest.Request


class BatchStream:
    """One BatchCommands stream: send (id, request) batches, collect answers by id."""

    def __init__(self, stub: tikvpb_pb2_grpc.TikvStub, metadata=()) -> None:
        self._out: queue.Queue = queue.Queue()
        self.answers: dict[int, tikvpb_pb2.BatchCommandsResponse.Response] = {}
        self.error: grpc.RpcError | None = None
        self._call = stub.BatchCommands(iter(self._out.get, None), metadata=metadata)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            for batch in self._call:
                for request_id, resp in zip(batch.request_ids, batch.responses):
                    self.answers[request_id] = resp
        except grpc.RpcError as err:
            self.error = err

    def send(self, requests: dict[int, Request]) -> None:
        self._out.put(tikvpb_pb2.BatchCommandsRequest(request_ids=list(requests), requests=list(requests.values())))

    def close(self) -> None:
        self._out.put(None)
        self._reader.join(10)
        assert not self._reader.is_alive()


def test_batched_commands_answer_as_their_unary_twins(sim_cluster, channels, table_region):
    ts = commit_rows(sim_cluster, {1: b"a", 2: b"b"})
    kv = channels(table_region.leader_store_id)
    get = kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(2), version=ts, need_commit_ts=True)
    scan = kvrpcpb_pb2.ScanRequest(context=ctx(table_region), start_key=row(0), limit=10, version=ts)
    batch_get = kvrpcpb_pb2.BatchGetRequest(context=ctx(table_region), keys=[row(1), row(9)], version=ts)
    wrong_store = kvrpcpb_pb2.GetRequest(context=ctx(table_region, store_id=table_region.leader_store_id % 3 + 1),
                                         key=row(1), version=ts)
    stream = BatchStream(kv)
    stream.send({7: Request(Get=get), 8: Request(Scan=scan), 9: Request(BatchGet=batch_get),
                 10: Request(), 11: Request(Empty=tikvpb_pb2.BatchCommandsEmptyRequest(test_id=42, delay_time=5))})
    stream.send({12: Request(Get=wrong_store)})
    stream.close()
    assert stream.error is None
    assert stream.answers[7].Get == kv.KvGet(get)
    assert stream.answers[8].Scan == kv.KvScan(scan)
    assert stream.answers[9].BatchGet == kv.KvBatchGet(batch_get)
    assert stream.answers[10].WhichOneof("cmd") is None  # no cmd: TiKV's empty Response
    assert stream.answers[11].Empty.test_id == 42
    assert stream.answers[12].Get.region_error.HasField("store_not_match")


def test_batched_command_of_another_cluster_ends_the_stream(sim_cluster, channels, table_region):
    kv = channels(table_region.leader_store_id)
    stream = BatchStream(kv)
    stream.send({1: Request(Get=kvrpcpb_pb2.GetRequest(context=ctx(table_region, cluster_id=1), key=row(1),
                                                          version=1))})
    stream.close()
    assert stream.error is not None and stream.error.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_health_is_serving_on_stores_and_pd(sim_cluster):
    for address in [sim_cluster.pd_address, *sim_cluster.store_addresses.values()]:
        with grpc.insecure_channel(address) as channel:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_forwarded_host_is_served_by_the_named_store(sim_cluster, channels, table_region):
    ts = commit_rows(sim_cluster, {1: b"a"})
    leader = table_region.leader_store_id
    proxy = channels(leader % 3 + 1)
    get = kvrpcpb_pb2.GetRequest(context=ctx(table_region), key=row(1), version=ts)
    leader_address = sim_cluster.store_addresses[leader]
    assert proxy.KvGet(get).region_error.HasField("store_not_match")  # without the header: served locally
    assert proxy.KvGet(get, metadata=[(FORWARD_METADATA_KEY, leader_address)]).value == b"a"
    stream = BatchStream(proxy, metadata=[(FORWARD_METADATA_KEY, leader_address)])
    stream.send({1: Request(Get=get)})
    stream.close()
    assert stream.answers[1].Get.value == b"a"
    with pytest.raises(grpc.RpcError) as err:
        proxy.KvGet(get, metadata=[(FORWARD_METADATA_KEY, "127.0.0.1:1")])
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_etcd_range_serves_the_gc_safepoint_client_go_reads(sim_cluster):
    with grpc.insecure_channel(sim_cluster.pd_address) as channel:
        etcd = etcdserverpb_pb2_grpc.KVStub(channel)
        before = etcd.Range(etcdserverpb_pb2.RangeRequest(key=GC_SAVED_SAFE_POINT_KEY))
        assert (list(before.kvs), before.count) == ([], 0)  # no GC yet: the key is absent
        safe_point = sim_cluster.tso.next()
        sim_cluster.gc_safe_points.advance_gc_safe_point(safe_point)
        after = etcd.Range(etcdserverpb_pb2.RangeRequest(key=GC_SAVED_SAFE_POINT_KEY))
        assert [(kv.key, int(kv.value)) for kv in after.kvs] == [(GC_SAVED_SAFE_POINT_KEY, safe_point)]
        assert after.header.revision > before.header.revision
        prefix = etcd.Range(etcdserverpb_pb2.RangeRequest(key=b"/tidb/", range_end=b"/tidb0", count_only=True))
        assert (prefix.count, list(prefix.kvs)) == (1, [])


def test_stopping_a_store_ends_an_open_batch_stream(sim_cluster, channels, table_region):
    leader = table_region.leader_store_id
    stream = BatchStream(channels(leader))
    stream.send({1: Request(Empty=tikvpb_pb2.BatchCommandsEmptyRequest(test_id=1))})
    deadline = time.monotonic() + 5
    while 1 not in stream.answers and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    sim_cluster.stop_store(leader)
    stream.close()
    assert time.monotonic() - t0 < 5 and stream.error is not None
