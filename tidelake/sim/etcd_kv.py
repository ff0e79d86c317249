"""PD's embedded etcd KV (`etcdserverpb.KV/Range`) for the keys TiKV clients read (docs/wire.md#pds-etcd-kv).

PD serves etcd's client API on its own client URL. client-go's safepoint checker
(client-go tikv/safepoint.go `loadSafePoint`, key `GcSavedSafePoint`) reads
`/tidb/store/gcworker/saved_safe_point` at start and every second and refuses reads older than
it; TiDB's GC worker writes that key (decimal text) whenever it advances the GC safepoint. The sim
derives the key from the cluster's GC safepoint, so the two can never disagree; absent until the
first GC, as in a fresh cluster. Range follows etcd's rules for `range_end` (empty: one key;
"\\0": every key >= key; else [key, range_end)), `limit`, `count_only` and `keys_only`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from tidelake.kvproto import etcdserverpb_pb2, etcdserverpb_pb2_grpc, mvccpb_pb2

if TYPE_CHECKING:
    from tidelake.sim.cluster_view import ClusterView

GC_SAVED_SAFE_POINT_KEY = b"/tidb/store/gcworker/saved_safe_point"


class EtcdKvService(etcdserverpb_pb2_grpc.KVServicer):
    def __init__(self, cluster: ClusterView, member_id: int) -> None:
        self._cluster = cluster
        self._member_id = member_id
        self._mu = threading.Lock()
        self._revision = 1  # etcd starts at 1; each change of a served key is one more revision
        self._kvs: dict[bytes, mvccpb_pb2.KeyValue] = {}

    def _refresh(self) -> int:
        """Bring the served keys up to date with the cluster; returns the current revision."""
        safe_point = self._cluster.gc_safe_points.gc_safe_point
        with self._mu:
            current = self._kvs.get(GC_SAVED_SAFE_POINT_KEY)
            value = str(safe_point).encode()
            if safe_point and (current is None or current.value != value):
                self._revision += 1
                created = current.create_revision if current is not None else self._revision
                version = current.version + 1 if current is not None else 1
                self._kvs[GC_SAVED_SAFE_POINT_KEY] = mvccpb_pb2.KeyValue(
                    key=GC_SAVED_SAFE_POINT_KEY, value=value, create_revision=created,
                    mod_revision=self._revision, version=version)
            return self._revision

    def Range(self, request, context):
        revision = self._refresh()
        key, end = request.key, request.range_end
        with self._mu:
            found = sorted((kv for k, kv in self._kvs.items() if _in_range(k, key, end)), key=lambda kv: kv.key)
        if request.sort_order == etcdserverpb_pb2.RangeRequest.DESCEND:
            found.reverse()
        header = etcdserverpb_pb2.ResponseHeader(cluster_id=self._cluster.cluster_id, member_id=self._member_id,
                                                 revision=revision, raft_term=1)
        count = len(found)
        if request.count_only:
            return etcdserverpb_pb2.RangeResponse(header=header, count=count)
        more = 0 < request.limit < count
        if more:
            found = found[: request.limit]
        kvs = [mvccpb_pb2.KeyValue(key=kv.key, create_revision=kv.create_revision, mod_revision=kv.mod_revision,
                                   version=kv.version, value=b"" if request.keys_only else kv.value) for kv in found]
        return etcdserverpb_pb2.RangeResponse(header=header, kvs=kvs, more=more, count=count)


def _in_range(k: bytes, key: bytes, range_end: bytes) -> bool:
    if not range_end:
        return k == key
    if range_end == b"\0":
        return k >= key
    return key <= k < range_end
