"""PD's embedded etcd keyspace: keys with etcd's revisions, and Range, Put and Txn over them
(docs/wire.md#pds-etcd-kv). It lives in the cluster, so a restarted PD serves the same keys.

Semantics of etcd-io/etcd server/etcdserver/txn/txn.go (`Txn`, `applyCompare`, `compareKV`) and
server/storage/mvcc (revisions): the store revision grows by one per request that writes, every
key written by it gets that `mod_revision`; a key's `create_revision` is the revision that created
it and `version` counts its writes. A compare on a missing key sees zero revisions and version,
and a VALUE compare on it is false. No history is kept: a Range at an older revision answers as
etcd does after compacting it. Derived keys (set by the simulator from its own state) refuse
client writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import grpc

from tidelake.kvproto import etcdserverpb_pb2 as pb
from tidelake.kvproto import mvccpb_pb2

MAX_TXN_OPS = 128  # etcd's --max-txn-ops default (server/embed/config.go DefaultMaxTxnOps)

Compare = pb.Compare


class EtcdError(Exception):
    """An etcd client error: its gRPC code and etcd's message (api/v3rpc/rpctypes/error.go)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class EtcdKeyspace:
    """Thread-safe; one per simulated cluster."""

    def __init__(self, derived: tuple[bytes, ...] = ()) -> None:
        """`derived`: the keys only `derive` writes (absent until it first does)."""
        self._mu = threading.Lock()
        self._revision = 1  # etcd starts at 1
        self._kvs: dict[bytes, mvccpb_pb2.KeyValue] = {}
        self._derived = frozenset(derived)

    @property
    def revision(self) -> int:
        with self._mu:
            return self._revision

    def derive(self, key: bytes, value: bytes) -> None:
        """Set a key the simulator owns (one revision when its value changes)."""
        with self._mu:
            current = self._kvs.get(key)
            if current is None or current.value != value:
                self._revision += 1
                self._write(key, value, self._revision)

    def range(self, request: pb.RangeRequest) -> tuple[list[mvccpb_pb2.KeyValue], int]:
        """The keys a RangeRequest selects, sorted by key, and the revision they were read at."""
        _require_key(request.key)
        with self._mu:
            self._check_revision(request.revision)
            return self._select(request.key, request.range_end), self._revision

    def put(self, request: pb.PutRequest) -> tuple[mvccpb_pb2.KeyValue | None, int]:
        """Apply a Put; returns the key's previous KeyValue (None if it was absent) and the new revision."""
        with self._mu:
            previous = self._check_put(request)
            self._revision += 1
            self._apply_put(request, self._revision)
            return previous, self._revision

    def txn(self, request: pb.TxnRequest,
            answer_range: Callable[[pb.RangeRequest, list[mvccpb_pb2.KeyValue], int], pb.RangeResponse],
            ) -> tuple[bool, list[pb.ResponseOp], int]:
        """Evaluate the compares and run one branch atomically; returns (succeeded, its responses,
        the revision after it). `answer_range` shapes a Range op's answer as the Range RPC does."""
        for op in (*request.success, *request.failure):
            if op.WhichOneof("request") is None:
                raise EtcdError(grpc.StatusCode.UNIMPLEMENTED,
                                "the simulator's Txn runs only request_range and request_put operations")
        if max(len(request.compare), len(request.success), len(request.failure)) > MAX_TXN_OPS:
            raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: too many operations in txn request")
        for branch in (request.success, request.failure):
            puts = [op.request_put.key for op in branch if op.WhichOneof("request") == "request_put"]
            if len(puts) != len(set(puts)):
                raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request")
        with self._mu:
            succeeded = all(self._holds(c) for c in request.compare)
            ops = request.success if succeeded else request.failure
            for op in ops:
                if op.WhichOneof("request") == "request_put":
                    self._check_put(op.request_put)
                else:
                    _require_key(op.request_range.key)
                    self._check_revision(op.request_range.revision)
            writes = any(op.WhichOneof("request") == "request_put" for op in ops)
            revision = self._revision + 1 if writes else self._revision
            responses = []
            for op in ops:
                if op.WhichOneof("request") == "request_put":
                    previous = self._apply_put(op.request_put, revision)
                    put = pb.PutResponse(prev_kv=previous) if op.request_put.prev_kv and previous else pb.PutResponse()
                    responses.append(pb.ResponseOp(response_put=put))
                else:
                    rng = op.request_range
                    found = self._select(rng.key, rng.range_end)
                    responses.append(pb.ResponseOp(response_range=answer_range(rng, found, revision)))
            self._revision = revision
            return succeeded, responses, revision

    # --- under the lock --------------------------------------------------------------------

    def _select(self, key: bytes, range_end: bytes) -> list[mvccpb_pb2.KeyValue]:
        found = [kv for k, kv in self._kvs.items() if _in_range(k, key, range_end)]
        return [_copy(kv) for kv in sorted(found, key=lambda kv: kv.key)]

    def _check_revision(self, revision: int) -> None:
        if revision > self._revision:
            raise EtcdError(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision")
        if 0 < revision < self._revision:
            raise EtcdError(grpc.StatusCode.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted")

    def _check_put(self, request: pb.PutRequest) -> mvccpb_pb2.KeyValue | None:
        """etcd's refusals of a Put (v3rpc key.go checkPutRequest, txn.go checkRequestPut); the current KeyValue."""
        _require_key(request.key)
        if request.ignore_value and request.value:
            raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: value is provided")
        if request.ignore_lease and request.lease:
            raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: lease is provided")
        if request.lease:  # the simulator grants no leases
            raise EtcdError(grpc.StatusCode.NOT_FOUND, "etcdserver: requested lease not found")
        if request.key in self._derived:
            raise EtcdError(grpc.StatusCode.PERMISSION_DENIED,
                            f"etcdserver: permission denied (the simulator derives {request.key.decode(errors='replace')} "
                            "from its own state)")
        current = self._kvs.get(request.key)
        if current is None and (request.ignore_value or request.ignore_lease):
            raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key not found")
        return _copy(current) if current is not None else None

    def _apply_put(self, request: pb.PutRequest, revision: int) -> mvccpb_pb2.KeyValue | None:
        previous = self._kvs.get(request.key)
        value = previous.value if request.ignore_value and previous is not None else request.value
        self._write(request.key, value, revision)
        return _copy(previous) if previous is not None else None

    def _write(self, key: bytes, value: bytes, revision: int) -> None:
        current = self._kvs.get(key)
        self._kvs[key] = mvccpb_pb2.KeyValue(
            key=key, value=value, mod_revision=revision,
            create_revision=current.create_revision if current is not None else revision,
            version=current.version + 1 if current is not None else 1)

    def _holds(self, compare: pb.Compare) -> bool:
        found = self._select(compare.key, compare.range_end)
        if not found:
            return compare.target != Compare.VALUE and _compare_kv(compare, mvccpb_pb2.KeyValue())
        return all(_compare_kv(compare, kv) for kv in found)


def _compare_kv(compare: pb.Compare, kv: mvccpb_pb2.KeyValue) -> bool:
    """etcd's compareKV: the key's field against the compare's (an unset target_union member is 0 or b"")."""
    field = {Compare.VERSION: "version", Compare.CREATE: "create_revision", Compare.MOD: "mod_revision",
             Compare.VALUE: "value", Compare.LEASE: "lease"}[compare.target]
    given = getattr(compare, field) if compare.WhichOneof("target_union") == field else type(getattr(kv, field))()
    have = getattr(kv, field)
    return {Compare.EQUAL: have == given, Compare.NOT_EQUAL: have != given,
            Compare.GREATER: have > given, Compare.LESS: have < given}.get(compare.result, True)


def _require_key(key: bytes) -> None:
    if not key:
        raise EtcdError(grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: key is not provided")


def _copy(kv: mvccpb_pb2.KeyValue) -> mvccpb_pb2.KeyValue:
    out = mvccpb_pb2.KeyValue()
    out.CopyFrom(kv)
    return out


def _in_range(k: bytes, key: bytes, range_end: bytes) -> bool:
    """etcd's key ranges: empty `range_end` is `key` alone, "\\0" every key >= key, else [key, range_end)."""
    if not range_end:
        return k == key
    if range_end == b"\0":
        return k >= key
    return key <= k < range_end
