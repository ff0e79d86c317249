"""One simulated TiKV store's transactional read servicer (`tikvpb.Tikv`).

It answers only for regions this store leads and returns the region errors TiKV returns otherwise
(docs/metadata.md#kvrpcpbcontext, docs/metadata.md#region-errors-during-reads), so clients exercise their real retry paths. Keys in requests are
raw; region boundaries in errors are encoded (docs/metadata.md#tikv-read-semantics). Reads, lock resolution and TiDB's
transactional writes (docs/wire.md#transactional-writes) go to the shared MvccStore with TiKV's semantics; every
command is also reachable through BatchCommands (docs/wire.md#batchcommands).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import errorpb_pb2, kvrpcpb_pb2, tikvpb_pb2_grpc
from tidelake.sim.batch_commands import serve_batch_commands
from tidelake.sim.mvcc import (
    MAX_TS,
    CommitTsExpiredError,
    KeyLockedError,
    Lock,
    MvccError,
    PrimaryMismatchError,
    TxnCommittedError,
    TxnLockNotFoundError,
    TxnNotFoundError,
    WriteConflictError,
)
from tidelake.sim.regions import SimRegion

if TYPE_CHECKING:
    from tidelake.sim.cluster_view import ClusterView

_LOCK_TYPE = {"put": kvrpcpb_pb2.Put, "delete": kvrpcpb_pb2.Del, "lock": kvrpcpb_pb2.Lock,
              "pessimistic": kvrpcpb_pb2.PessimisticLock}
_MUTATION_OP = {kvrpcpb_pb2.Put: "put", kvrpcpb_pb2.Insert: "put", kvrpcpb_pb2.Del: "delete",
                kvrpcpb_pb2.Lock: "lock"}


def lock_info(lock: Lock) -> kvrpcpb_pb2.LockInfo:
    return kvrpcpb_pb2.LockInfo(primary_lock=lock.primary, lock_version=lock.start_ts, key=lock.key,
                                lock_ttl=lock.ttl_ms, txn_size=lock.txn_size, lock_type=_LOCK_TYPE[lock.op],
                                min_commit_ts=lock.min_commit_ts, lock_for_update_ts=lock.for_update_ts,
                                use_async_commit=lock.use_async_commit, secondaries=list(lock.secondaries))


def key_error(err: MvccError) -> kvrpcpb_pb2.KeyError:
    """TiKV `extract_key_error` for the errors the MVCC layer raises."""
    if isinstance(err, KeyLockedError):
        return kvrpcpb_pb2.KeyError(locked=lock_info(err.lock))
    if isinstance(err, WriteConflictError):
        return kvrpcpb_pb2.KeyError(conflict=kvrpcpb_pb2.WriteConflict(
            start_ts=err.start_ts, conflict_ts=err.conflict_start_ts, conflict_commit_ts=err.conflict_commit_ts,
            key=err.key, primary=err.primary, reason=kvrpcpb_pb2.WriteConflict.Reason.Value(err.reason)))
    if isinstance(err, TxnLockNotFoundError):
        return kvrpcpb_pb2.KeyError(txn_lock_not_found=kvrpcpb_pb2.TxnLockNotFound(key=err.key))
    if isinstance(err, CommitTsExpiredError):
        return kvrpcpb_pb2.KeyError(commit_ts_expired=kvrpcpb_pb2.CommitTsExpired(
            start_ts=err.start_ts, attempted_commit_ts=err.commit_ts, key=err.key, min_commit_ts=err.min_commit_ts))
    if isinstance(err, TxnNotFoundError):
        return kvrpcpb_pb2.KeyError(txn_not_found=kvrpcpb_pb2.TxnNotFound(start_ts=err.start_ts,
                                                                          primary_key=err.primary))
    if isinstance(err, PrimaryMismatchError):
        return kvrpcpb_pb2.KeyError(primary_mismatch=kvrpcpb_pb2.PrimaryMismatch(lock_info=lock_info(err.lock)))
    return kvrpcpb_pb2.KeyError(abort=str(err))  # e.g. TxnCommittedError: TiKV reports `Committed` as abort


class KvService(tikvpb_pb2_grpc.TikvServicer):
    def __init__(self, store_id: int, cluster: ClusterView) -> None:
        self._store_id = store_id
        self._cluster = cluster
        # runs batched commands; TiKV's read and scheduler pools, sized for a 2-core sim
        self._batch_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"sim-batch-{store_id}")

    def close(self) -> None:
        self._batch_pool.shutdown(wait=False, cancel_futures=True)

    def BatchCommands(self, request_iterator, context):
        return serve_batch_commands(self, self._cluster.cluster_id, request_iterator, context, self._batch_pool)

    # ---- request checks --------------------------------------------------------------------

    def _route(self, ctx: kvrpcpb_pb2.Context, context: grpc.ServicerContext,
               keys: list[bytes]) -> tuple[SimRegion | None, errorpb_pb2.Error | None]:
        """Everything TiKV checks before reading: cluster id, load, store, leader, epoch, key range."""
        cluster = self._cluster
        if ctx.cluster_id and ctx.cluster_id != cluster.cluster_id:  # kv.rs reject_if_cluster_id_mismatch
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"cluster id mismatch, request: {ctx.cluster_id}, tikv: {cluster.cluster_id}")
        delay_ms = cluster.faults.slow_delay_ms(self._store_id)
        if delay_ms:
            time.sleep(delay_ms / 1000)
        busy_ms = cluster.faults.busy_remaining_ms(self._store_id)
        if busy_ms:
            return None, errorpb_pb2.Error(message="server is busy", server_is_busy=errorpb_pb2.ServerIsBusy(
                reason="sim: store busy", backoff_ms=busy_ms, estimated_wait_ms=busy_ms))
        if ctx.peer.store_id != self._store_id:
            return None, errorpb_pb2.Error(message="store not match", store_not_match=errorpb_pb2.StoreNotMatch(
                request_store_id=ctx.peer.store_id, actual_store_id=self._store_id))
        region = cluster.regions.get(ctx.region_id)
        peer = region.peer_on(self._store_id) if region is not None else None
        if region is None or peer is None:
            return None, errorpb_pb2.Error(message=f"region {ctx.region_id} not found",
                                           region_not_found=errorpb_pb2.RegionNotFound(region_id=ctx.region_id))
        if ctx.peer.id and ctx.peer.id != peer.id:
            return None, errorpb_pb2.Error(message="mismatch peer id", mismatch_peer_id=errorpb_pb2.MismatchPeerId(
                request_peer_id=ctx.peer.id, store_peer_id=peer.id))
        if region.leader_store_id != self._store_id:
            return None, errorpb_pb2.Error(message=f"peer is not leader for region {region.id}",
                                           not_leader=errorpb_pb2.NotLeader(region_id=region.id,
                                                                            leader=region.leader_peer()))
        if not ctx.HasField("region_epoch"):
            return None, errorpb_pb2.Error(message="missing epoch!")
        if ctx.region_epoch.version != region.version:  # reads check version only (docs/wire.md#small-messages)
            current = [region]
            sibling = cluster.regions.prev(region)
            if ctx.region_epoch.version < region.version and sibling is not None:
                current.append(sibling)
            return None, errorpb_pb2.Error(
                message=f"epoch not match for region {region.id}: request {ctx.region_epoch.version}, "
                        f"current {region.version}",
                epoch_not_match=errorpb_pb2.EpochNotMatch(current_regions=[r.to_pb() for r in current]))
        for key in keys:
            encoded = encode_bytes(key)
            if not region.contains(encoded):
                return None, errorpb_pb2.Error(
                    message=f"key {key.hex()} is not in region {region.id}",
                    key_not_in_region=errorpb_pb2.KeyNotInRegion(key=encoded, region_id=region.id,
                                                                 start_key=region.start_key,
                                                                 end_key=region.end_key))
        return region, None

    # ---- reads -----------------------------------------------------------------------------

    def KvGet(self, request, context):
        _, region_error = self._route(request.context, context, [request.key])
        if region_error is not None:
            return kvrpcpb_pb2.GetResponse(region_error=region_error)
        ctx = request.context
        try:
            value, commit_ts = self._cluster.mvcc.get_with_commit_ts(
                request.key, request.version, ctx.resolved_locks, ctx.committed_locks)
        except KeyLockedError as err:
            return kvrpcpb_pb2.GetResponse(error=key_error(err))
        if value is None:
            return kvrpcpb_pb2.GetResponse(not_found=True)
        return kvrpcpb_pb2.GetResponse(value=value, commit_ts=commit_ts if request.need_commit_ts else 0)

    def KvScan(self, request, context):
        """Forward [start_key, end_key) or reverse [end_key, start_key), clipped to the region (docs/wire.md#event)."""
        upper, lower = (request.start_key, request.end_key) if request.reverse else (request.end_key,
                                                                                    request.start_key)
        region, region_error = self._route(request.context, context, [lower] if not request.reverse else [])
        if region_error is not None:
            return kvrpcpb_pb2.ScanResponse(region_error=region_error)
        region_lo, region_hi = region.raw_range()
        lo = max(lower, region_lo)
        hi = region_hi if not upper else (min(upper, region_hi) if region_hi else upper)
        if request.reverse and request.start_key and region_lo and request.start_key < region_lo:
            return kvrpcpb_pb2.ScanResponse(region_error=errorpb_pb2.Error(
                message="key not in region", key_not_in_region=errorpb_pb2.KeyNotInRegion(
                    key=encode_bytes(request.start_key), region_id=region.id, start_key=region.start_key,
                    end_key=region.end_key)))
        ctx = request.context
        rows = self._cluster.mvcc.scan(lo, hi, request.version, request.limit, ctx.resolved_locks,
                                       ctx.committed_locks, reverse=request.reverse)
        pairs = []
        for key, value in rows:
            if isinstance(value, KeyLockedError):
                pairs.append(kvrpcpb_pb2.KvPair(error=key_error(value)))  # key left empty, as TiKV
            else:
                pairs.append(kvrpcpb_pb2.KvPair(key=key, value=b"" if request.key_only else value))
        return kvrpcpb_pb2.ScanResponse(pairs=pairs)

    def KvBatchGet(self, request, context):
        keys = list(request.keys)
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.BatchGetResponse(region_error=region_error)
        ctx = request.context
        pairs = []
        for key in keys:
            try:
                value, commit_ts = self._cluster.mvcc.get_with_commit_ts(
                    key, request.version, ctx.resolved_locks, ctx.committed_locks)
            except KeyLockedError as err:
                pairs.append(kvrpcpb_pb2.KvPair(error=key_error(err)))
                continue
            if value is not None:  # missing keys are left out (docs/wire.md#error)
                pairs.append(kvrpcpb_pb2.KvPair(key=key, value=value,
                                                commit_ts=commit_ts if request.need_commit_ts else 0))
        return kvrpcpb_pb2.BatchGetResponse(pairs=pairs)

    # ---- lock resolution -------------------------------------------------------------------

    def KvCheckTxnStatus(self, request, context):
        _, region_error = self._route(request.context, context, [request.primary_key])
        if region_error is not None:
            return kvrpcpb_pb2.CheckTxnStatusResponse(region_error=region_error)
        try:
            status = self._cluster.mvcc.check_txn_status(
                request.primary_key, request.lock_ts, request.caller_start_ts, request.current_ts,
                request.rollback_if_not_exist, verify_is_primary=request.verify_is_primary,
                force_sync_commit=request.force_sync_commit,
                resolving_pessimistic_lock=request.resolving_pessimistic_lock)
        except MvccError as err:
            return kvrpcpb_pb2.CheckTxnStatusResponse(error=key_error(err))
        resp = kvrpcpb_pb2.CheckTxnStatusResponse(lock_ttl=status.lock_ttl, commit_version=status.commit_ts,
                                                  action=kvrpcpb_pb2.Action.Value(status.action))
        if status.lock is not None:
            resp.lock_info.CopyFrom(lock_info(status.lock))
        return resp

    def KvResolveLock(self, request, context):
        keys = list(request.keys)
        region, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.ResolveLockResponse(region_error=region_error)
        start, end = region.raw_range()
        mvcc = self._cluster.mvcc
        try:
            if request.txn_infos:
                for txn in request.txn_infos:
                    mvcc.resolve_lock(txn.txn, txn.status, None, start, end)
            else:
                mvcc.resolve_lock(request.start_version, request.commit_version, keys or None, start, end)
        except MvccError as err:
            return kvrpcpb_pb2.ResolveLockResponse(error=key_error(err))
        return kvrpcpb_pb2.ResolveLockResponse()

    def KvScanLock(self, request, context):
        region, region_error = self._route(request.context, context, [])
        if region_error is not None:
            return kvrpcpb_pb2.ScanLockResponse(region_error=region_error)
        region_lo, region_hi = region.raw_range()
        lo = max(request.start_key, region_lo)
        hi = region_hi if not request.end_key else (min(request.end_key, region_hi) if region_hi else request.end_key)
        locks = self._cluster.mvcc.scan_locks(lo, hi, request.max_version, request.limit)
        return kvrpcpb_pb2.ScanLockResponse(locks=[lock_info(lk) for lk in locks])

    def KvCheckSecondaryLocks(self, request, context):
        keys = list(request.keys)
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.CheckSecondaryLocksResponse(region_error=region_error)
        try:
            status = self._cluster.mvcc.check_secondary_locks(keys, request.start_version)
        except MvccError as err:
            return kvrpcpb_pb2.CheckSecondaryLocksResponse(error=key_error(err))
        return kvrpcpb_pb2.CheckSecondaryLocksResponse(locks=[lock_info(lk) for lk in status.locks],
                                                       commit_ts=status.commit_ts)

    # ---- transactional writes (docs/wire.md#transactional-writes) ------------------------------------------

    def KvPrewrite(self, request, context):
        mutations = list(request.mutations)
        keys = [m.key for m in mutations]
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.PrewriteResponse(region_error=region_error)
        checks = list(request.pessimistic_actions)
        pessimistic = frozenset(m.key for i, m in enumerate(mutations)
                                if i < len(checks) and checks[i] == kvrpcpb_pb2.PrewriteRequest.DO_PESSIMISTIC_CHECK)
        writes, must_not_exist = [], []
        for m in mutations:
            if m.op == kvrpcpb_pb2.CheckNotExists:
                must_not_exist.append(m.key)
            elif m.op in _MUTATION_OP:
                writes.append((_MUTATION_OP[m.op], m.key, m.value))
                if m.op == kvrpcpb_pb2.Insert:
                    must_not_exist.append(m.key)
            else:
                return kvrpcpb_pb2.PrewriteResponse(errors=[kvrpcpb_pb2.KeyError(
                    abort=f"invalid mutation op {kvrpcpb_pb2.Op.Name(m.op)} in prewrite")])
        mvcc = self._cluster.mvcc
        if not request.skip_constraint_check:
            for key in must_not_exist:  # Insert / CheckNotExists: TiKV's AlreadyExist
                if mvcc.get(key, MAX_TS - 1, [request.start_version]) is not None:
                    return kvrpcpb_pb2.PrewriteResponse(errors=[kvrpcpb_pb2.KeyError(
                        already_exist=kvrpcpb_pb2.AlreadyExist(key=key))])
        try:
            result = mvcc.prewrite(
                writes, request.primary_lock, request.start_version, request.lock_ttl,
                min_commit_ts=request.min_commit_ts or None, txn_size=request.txn_size or None,
                for_update_ts=request.for_update_ts, pessimistic_keys=pessimistic,
                use_async_commit=request.use_async_commit, secondaries=tuple(request.secondaries),
                try_one_pc=request.try_one_pc, max_commit_ts=request.max_commit_ts)
        except MvccError as err:
            return kvrpcpb_pb2.PrewriteResponse(errors=[key_error(err)])
        return kvrpcpb_pb2.PrewriteResponse(min_commit_ts=result.min_commit_ts,
                                            one_pc_commit_ts=result.one_pc_commit_ts)

    def KvCommit(self, request, context):
        keys = list(request.keys)
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.CommitResponse(region_error=region_error)
        try:
            self._cluster.mvcc.commit(keys, request.start_version, request.commit_version)
        except MvccError as err:
            return kvrpcpb_pb2.CommitResponse(error=key_error(err))
        except ValueError as err:  # commit ts not above start ts: TiKV's InvalidTxnTso
            return kvrpcpb_pb2.CommitResponse(error=kvrpcpb_pb2.KeyError(abort=str(err)))
        return kvrpcpb_pb2.CommitResponse()

    def KvBatchRollback(self, request, context):
        keys = list(request.keys)
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.BatchRollbackResponse(region_error=region_error)
        try:
            self._cluster.mvcc.rollback(keys, request.start_version)
        except MvccError as err:
            return kvrpcpb_pb2.BatchRollbackResponse(error=key_error(err))
        return kvrpcpb_pb2.BatchRollbackResponse()

    def KvCleanup(self, request, context):
        _, region_error = self._route(request.context, context, [request.key])
        if region_error is not None:
            return kvrpcpb_pb2.CleanupResponse(region_error=region_error)
        try:
            self._cluster.mvcc.cleanup(request.key, request.start_version, request.current_ts)
        except TxnCommittedError as err:  # kv.rs future_cleanup: committed is an answer, not an error
            return kvrpcpb_pb2.CleanupResponse(commit_version=err.commit_ts)
        except MvccError as err:
            return kvrpcpb_pb2.CleanupResponse(error=key_error(err))
        return kvrpcpb_pb2.CleanupResponse()

    def KvTxnHeartBeat(self, request, context):
        _, region_error = self._route(request.context, context, [request.primary_lock])
        if region_error is not None:
            return kvrpcpb_pb2.TxnHeartBeatResponse(region_error=region_error)
        try:
            ttl = self._cluster.mvcc.txn_heart_beat(request.primary_lock, request.start_version,
                                                    request.advise_lock_ttl)
        except MvccError as err:
            return kvrpcpb_pb2.TxnHeartBeatResponse(error=key_error(err))
        return kvrpcpb_pb2.TxnHeartBeatResponse(lock_ttl=ttl)

    def KvPessimisticLock(self, request, context):
        keys = [m.key for m in request.mutations]
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.PessimisticLockResponse(region_error=region_error)
        force_lock = request.wake_up_mode == kvrpcpb_pb2.WakeUpModeForceLock
        try:
            results = self._cluster.mvcc.pessimistic_lock(
                keys, request.primary_lock, request.start_version, request.for_update_ts, request.lock_ttl,
                lock_only_if_exists=request.lock_only_if_exists, allow_lock_with_conflict=force_lock,
                min_commit_ts=request.min_commit_ts)
        except MvccError as err:
            if force_lock:
                return kvrpcpb_pb2.PessimisticLockResponse(errors=[key_error(err)], results=[
                    kvrpcpb_pb2.PessimisticLockKeyResult(type=kvrpcpb_pb2.LockResultFailed) for _ in keys])
            return kvrpcpb_pb2.PessimisticLockResponse(errors=[key_error(err)])
        if force_lock:  # WakeUpModeForceLock: everything travels in `results`
            return kvrpcpb_pb2.PessimisticLockResponse(results=[kvrpcpb_pb2.PessimisticLockKeyResult(
                type=kvrpcpb_pb2.LockResultLockedWithConflict if r.locked_with_conflict_ts
                else kvrpcpb_pb2.LockResultNormal,
                value=r.value, existence=r.exists, locked_with_conflict_ts=r.locked_with_conflict_ts)
                for r in results])
        resp = kvrpcpb_pb2.PessimisticLockResponse()
        if request.return_values:
            resp.values.extend(r.value for r in results)
        if request.return_values or request.check_existence:
            resp.not_founds.extend(not r.exists for r in results)
        return resp

    def KVPessimisticRollback(self, request, context):
        keys = list(request.keys)
        _, region_error = self._route(request.context, context, keys)
        if region_error is not None:
            return kvrpcpb_pb2.PessimisticRollbackResponse(region_error=region_error)
        self._cluster.mvcc.pessimistic_rollback(keys, request.start_version, request.for_update_ts)
        return kvrpcpb_pb2.PessimisticRollbackResponse()
