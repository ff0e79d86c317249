"""PD's embedded etcd KV (`etcdserverpb.KV` Range, Put and Txn) over the cluster's keyspace (docs/wire.md#pds-etcd-kv).

PD serves etcd's client API on its own client URL. client-go's safepoint checker
(client-go tikv/safepoint.go `loadSafePoint`, key `GcSavedSafePoint`) reads
`/tidb/store/gcworker/saved_safe_point` at start and every second and refuses reads older than
it; TiDB's GC worker writes that key (decimal text) whenever it advances the GC safepoint. The sim
derives the key from the cluster's GC safepoint, so the two can never disagree; absent until the
first GC, as in a fresh cluster. Other keys are the clients' own (tidelake's changefeed
registration, docs/operations.md#moving-or-re-creating-a-lake), kept in tidelake.sim.etcd_keyspace.
Range follows etcd's rules for `range_end`, `limit`, `count_only` and `keys_only`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelake.kvproto import etcdserverpb_pb2, etcdserverpb_pb2_grpc, mvccpb_pb2
from tidelake.sim.etcd_keyspace import EtcdError

if TYPE_CHECKING:
    from tidelake.sim.cluster_view import ClusterView

GC_SAVED_SAFE_POINT_KEY = b"/tidb/store/gcworker/saved_safe_point"


class EtcdKvService(etcdserverpb_pb2_grpc.KVServicer):
    def __init__(self, cluster: ClusterView, member_id: int) -> None:
        self._cluster = cluster
        self._keys = cluster.etcd
        self._member_id = member_id

    def _refresh(self) -> None:
        """Bring the derived keys up to date with the cluster."""
        safe_point = self._cluster.gc_safe_points.gc_safe_point
        if safe_point:
            self._keys.derive(GC_SAVED_SAFE_POINT_KEY, str(safe_point).encode())

    def _header(self, revision: int) -> etcdserverpb_pb2.ResponseHeader:
        return etcdserverpb_pb2.ResponseHeader(cluster_id=self._cluster.cluster_id, member_id=self._member_id,
                                               revision=revision, raft_term=1)

    def Range(self, request, context):
        self._refresh()
        try:
            found, revision = self._keys.range(request)
        except EtcdError as err:
            context.abort(err.code, str(err))
        return self._range_response(request, found, revision)

    def Put(self, request, context):
        self._refresh()
        try:
            previous, revision = self._keys.put(request)
        except EtcdError as err:
            context.abort(err.code, str(err))
        kept = previous if request.prev_kv and previous is not None else None
        return etcdserverpb_pb2.PutResponse(header=self._header(revision), prev_kv=kept)

    def Txn(self, request, context):
        self._refresh()
        try:
            succeeded, responses, revision = self._keys.txn(request, self._range_response)
        except EtcdError as err:
            context.abort(err.code, str(err))
        for response in responses:
            getattr(response, response.WhichOneof("response")).header.CopyFrom(self._header(revision))
        return etcdserverpb_pb2.TxnResponse(header=self._header(revision), succeeded=succeeded, responses=responses)

    def _range_response(self, request: etcdserverpb_pb2.RangeRequest, found: list[mvccpb_pb2.KeyValue],
                        revision: int) -> etcdserverpb_pb2.RangeResponse:
        if request.sort_order == etcdserverpb_pb2.RangeRequest.DESCEND:
            found = found[::-1]
        header = self._header(revision)
        count = len(found)
        if request.count_only:
            return etcdserverpb_pb2.RangeResponse(header=header, count=count)
        more = 0 < request.limit < count
        if more:
            found = found[: request.limit]
        kvs = [mvccpb_pb2.KeyValue(key=kv.key, create_revision=kv.create_revision, mod_revision=kv.mod_revision,
                                   version=kv.version, value=b"" if request.keys_only else kv.value) for kv in found]
        return etcdserverpb_pb2.RangeResponse(header=header, kvs=kvs, more=more, count=count)
