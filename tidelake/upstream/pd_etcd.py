"""Keys of PD's embedded etcd, read and created through PDClient.etcd (docs/wire.md#pds-etcd-kv):
the create-if-absent of etcd's clients (a Txn comparing the key's create_revision with 0, as
etcd-io/etcd client/v3/concurrency and TiCDC's pkg/etcd do). Owner: the upstream clients.
"""

from __future__ import annotations

from tidelake.kvproto import etcdserverpb_pb2 as pb
from tidelake.kvproto import mvccpb_pb2
from tidelake.upstream.pd_client import PDClient


def create_if_absent(pd: PDClient, key: bytes, value: bytes) -> tuple[bool, mvccpb_pb2.KeyValue]:
    """Put `value` at `key` unless the key exists; (True, the new KeyValue) or (False, the one
    that was there). Of concurrent callers exactly one creates."""
    request = pb.TxnRequest(
        compare=[pb.Compare(key=key, target=pb.Compare.CREATE, result=pb.Compare.EQUAL, create_revision=0)],
        success=[pb.RequestOp(request_put=pb.PutRequest(key=key, value=value))],
        failure=[pb.RequestOp(request_range=pb.RangeRequest(key=key))])
    response = pd.etcd("Txn", request)
    if response.succeeded:
        return True, mvccpb_pb2.KeyValue(key=key, value=value, create_revision=response.header.revision,
                                         mod_revision=response.header.revision, version=1)
    return False, response.responses[0].response_range.kvs[0]
