"""PD's etcd Put and Txn through the generated etcd stub (docs/wire.md#pds-etcd-kv): etcd's
revisions, a create-if-absent that exactly one of many concurrent callers wins, keys that outlive
a PD restart, and etcd's refusals."""

from __future__ import annotations

import threading

import grpc
import pytest

from tidelake.kvproto import etcdserverpb_pb2 as pb
from tidelake.kvproto import etcdserverpb_pb2_grpc
from tidelake.sim.etcd_kv import GC_SAVED_SAFE_POINT_KEY

Compare = pb.Compare


def create_if_absent(key: bytes, value: bytes) -> pb.TxnRequest:
    return pb.TxnRequest(
        compare=[Compare(key=key, target=Compare.CREATE, result=Compare.EQUAL, create_revision=0)],
        success=[pb.RequestOp(request_put=pb.PutRequest(key=key, value=value))],
        failure=[pb.RequestOp(request_range=pb.RangeRequest(key=key))])


@pytest.fixture
def etcd(sim_cluster):
    with grpc.insecure_channel(sim_cluster.pd_address) as channel:
        yield etcdserverpb_pb2_grpc.KVStub(channel)


def test_create_if_absent_then_puts_follow_etcd_revisions(etcd):
    start = etcd.Range(pb.RangeRequest(key=b"/t/a")).header.revision
    won = etcd.Txn(create_if_absent(b"/t/a", b"first"))
    assert won.succeeded and won.header.revision == start + 1
    assert won.responses[0].WhichOneof("response") == "response_put"
    lost = etcd.Txn(create_if_absent(b"/t/a", b"second"))
    assert not lost.succeeded and lost.header.revision == start + 1  # a read-only branch writes no revision
    [kv] = lost.responses[0].response_range.kvs
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"first", start + 1, start + 1, 1)

    put = etcd.Put(pb.PutRequest(key=b"/t/a", value=b"third", prev_kv=True))
    assert put.header.revision == start + 2 and put.prev_kv.value == b"first"
    [kv] = etcd.Range(pb.RangeRequest(key=b"/t/a")).kvs
    assert (kv.value, kv.create_revision, kv.mod_revision, kv.version) == (b"third", start + 1, start + 2, 2)

    # One revision for a txn of two puts; compares on mod_revision and value; a VALUE compare on a
    # missing key is false.
    both = etcd.Txn(pb.TxnRequest(
        compare=[Compare(key=b"/t/a", target=Compare.MOD, result=Compare.EQUAL, mod_revision=start + 2),
                 Compare(key=b"/t/a", target=Compare.VALUE, result=Compare.EQUAL, value=b"third")],
        success=[pb.RequestOp(request_put=pb.PutRequest(key=b"/t/b", value=b"1")),
                 pb.RequestOp(request_put=pb.PutRequest(key=b"/t/c", value=b"2")),
                 pb.RequestOp(request_range=pb.RangeRequest(key=b"/t/", range_end=b"/t0", count_only=True))]))
    assert both.succeeded and both.header.revision == start + 3
    assert both.responses[2].response_range.count == 3  # the txn reads its own puts
    missing = etcd.Txn(pb.TxnRequest(compare=[Compare(key=b"/t/zz", target=Compare.VALUE, value=b"")]))
    assert not missing.succeeded
    older = etcd.Txn(pb.TxnRequest(compare=[
        Compare(key=b"/t/", range_end=b"/t0", target=Compare.CREATE, result=Compare.LESS, create_revision=start + 3)]))
    assert not older.succeeded  # /t/b and /t/c were created at start + 3


def test_concurrent_creates_have_exactly_one_winner(etcd):
    barrier = threading.Barrier(8)
    results: dict[int, pb.TxnResponse] = {}

    def create(i: int) -> None:
        barrier.wait()
        results[i] = etcd.Txn(create_if_absent(b"/race/key", f"lake-{i}".encode()))

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, r in results.items() if r.succeeded]
    assert len(results) == 8 and len(winners) == 1
    seen = {r.responses[0].response_range.kvs[0].value for r in results.values() if not r.succeeded}
    assert seen == {f"lake-{winners[0]}".encode()}


def test_keys_outlive_a_pd_restart(sim_cluster, etcd):
    etcd.Put(pb.PutRequest(key=b"/kept", value=b"v"))
    sim_cluster.stop_pd()
    sim_cluster.start_pd()
    with grpc.insecure_channel(sim_cluster.pd_address) as channel:
        [kv] = etcdserverpb_pb2_grpc.KVStub(channel).Range(pb.RangeRequest(key=b"/kept")).kvs
    assert kv.value == b"v"


@pytest.mark.parametrize(("call", "code", "message"), [
    (lambda e: e.Put(pb.PutRequest(key=b"", value=b"v")), grpc.StatusCode.INVALID_ARGUMENT,
     "etcdserver: key is not provided"),
    (lambda e: e.Put(pb.PutRequest(key=b"/k", value=b"v", lease=7)), grpc.StatusCode.NOT_FOUND,
     "etcdserver: requested lease not found"),
    (lambda e: e.Put(pb.PutRequest(key=b"/absent", ignore_value=True)), grpc.StatusCode.INVALID_ARGUMENT,
     "etcdserver: key not found"),
    (lambda e: e.Txn(pb.TxnRequest(success=[pb.RequestOp(request_put=pb.PutRequest(key=b"/d", value=b"1")),
                                            pb.RequestOp(request_put=pb.PutRequest(key=b"/d", value=b"2"))])),
     grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request"),
    (lambda e: e.Txn(pb.TxnRequest(success=[pb.RequestOp()])), grpc.StatusCode.UNIMPLEMENTED,
     "the simulator's Txn runs only request_range and request_put operations"),
    (lambda e: e.Range(pb.RangeRequest(key=b"/k", revision=10**9)), grpc.StatusCode.OUT_OF_RANGE,
     "etcdserver: mvcc: required revision is a future revision"),
])
def test_etcd_refusals(etcd, call, code, message):
    with pytest.raises(grpc.RpcError) as err:
        call(etcd)
    assert (err.value.code(), err.value.details()) == (code, message)


def test_the_derived_safepoint_key_refuses_writes_and_other_rpcs_are_unimplemented(sim_cluster, etcd):
    for _ in range(2):  # before the first GC (the key absent) and after
        with pytest.raises(grpc.RpcError) as err:
            etcd.Put(pb.PutRequest(key=GC_SAVED_SAFE_POINT_KEY, value=b"1"))
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        sim_cluster.gc_safe_points.advance_gc_safe_point(sim_cluster.tso.next())
    with grpc.insecure_channel(sim_cluster.pd_address) as channel:
        delete = channel.unary_unary("/etcdserverpb.KV/DeleteRange", request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as err:
            delete(b"")
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
