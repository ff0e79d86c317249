"""Resolve the locks a snapshot read meets, as client-go does for reads (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader).

A lock with start_ts <= T may belong to a transaction that commits at or below T, so a
consistent snapshot can never skip one. We ask the primary's region what became of the
transaction (CheckTxnStatus), then let TiKV read through the lock (committed_locks) or past it
(resolved_locks). While the lock is alive we report how long to wait, and the caller retries.
An async-commit transaction is never rolled back by CheckTxnStatus: once its primary's TTL has
passed, its fate is read from all its keys with CheckSecondaryLocks, as client-go's
`resolveAsyncCommitLock` does (docs/wire.md#transactional-writes).
Owner: the snapshot reader (tidelake.upstream.kv_snapshot) and stale_locks.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from cachetools import FIFOCache

from tidelake import tso
from tidelake.kvproto import kvrpcpb_pb2
from tidelake.upstream.backoffer import Backoffer
from tidelake.upstream.region_cache import RegionMiss
from tidelake.upstream.region_request import RegionRequestSender
from tidelake.upstream.upstream_errors import UpstreamError

log = logging.getLogger(__name__)

_MAX_UINT64 = (1 << 64) - 1
_STATUS_CACHE_SIZE = 65_536
ROLLED_BACK = 0


@dataclass
class ReadLocks:
    """Lock start_ts values one read at one ts may ignore or read through (Context fields 13, 22)."""

    resolved: set[int] = field(default_factory=set)
    committed: set[int] = field(default_factory=set)

    def apply(self, ctx: kvrpcpb_pb2.Context) -> None:
        ctx.resolved_locks.extend(sorted(self.resolved))
        ctx.committed_locks.extend(sorted(self.committed))


@dataclass(frozen=True)
class _Final:
    commit_ts: int  # ROLLED_BACK (0) or the commit ts


@dataclass(frozen=True)
class _Pushed:
    """Alive, but its min_commit_ts is now above the read ts: it will commit after it."""


@dataclass(frozen=True)
class _Alive:
    wait_ms: int


class LockResolver:
    """Shared by all reads of a SnapshotReader; caches final txn outcomes (commit ts or rollback)."""

    def __init__(self, sender: RegionRequestSender, cleanup: bool = True) -> None:
        self._sender = sender
        self._cleanup = cleanup
        self._lock = threading.Lock()
        # Both bounded, first in first out: a read does not keep an entry, so not an LRU. A cachetools
        # cache is not thread-safe: every access holds self._lock (a SnapshotReader's scans run at once).
        self._final: FIFOCache[int, int] = FIFOCache(_STATUS_CACHE_SIZE)  # start_ts -> commit_ts (0 = rolled back)
        # (start_ts, region id) resolved whole
        self._cleaned: FIFOCache[tuple[int, int], None] = FIFOCache(_STATUS_CACHE_SIZE)

    def resolve(self, locks: list[kvrpcpb_pb2.LockInfo], read_ts: int, read_locks: ReadLocks,
                bo: Backoffer) -> int:
        """Classify each lock into read_locks; return ms to wait before retrying (0 = retry now)."""
        wait_ms = 0
        for lock in locks:
            ts = lock.lock_version
            if ts in read_locks.resolved or ts in read_locks.committed:
                continue
            outcome = self._outcome(lock, read_ts, bo)
            if isinstance(outcome, _Alive):
                wait_ms = max(wait_ms, outcome.wait_ms, 1)
            elif isinstance(outcome, _Final) and outcome.commit_ts != ROLLED_BACK and outcome.commit_ts <= read_ts:
                read_locks.committed.add(ts)  # TiKV reads the value through the lock
            else:
                read_locks.resolved.add(ts)  # rolled back, or commits above read_ts
        return wait_ms

    def final_status(self, start_ts: int) -> int | None:
        with self._lock:
            return self._final.get(start_ts)

    def _remember(self, start_ts: int, commit_ts: int) -> None:
        with self._lock:
            self._final[start_ts] = commit_ts  # a write makes the entry the newest

    def _outcome(self, lock: kvrpcpb_pb2.LockInfo, read_ts: int, bo: Backoffer) -> _Final | _Pushed | _Alive:
        known = self.final_status(lock.lock_version)
        if known is not None:
            self._clean_up(lock, known, bo)  # another key of a decided txn: its region may still hold it
            return _Final(known)
        # client-go getTxnStatusFromLock: a TTL of 0 means "expired", so use MaxUint64 as now.
        current_ts = self._sender.pd.get_ts() if lock.lock_ttl else _MAX_UINT64
        resp = self._check_txn_status(lock, read_ts, current_ts, False, bo)
        if resp.HasField("error") and resp.error.HasField("txn_not_found"):
            if not _expired(lock, current_ts):
                return _Alive(_ms_before_expired(lock, lock.lock_ttl, current_ts))
            # The primary was never prewritten and the lock is past its TTL: roll it back.
            resp = self._check_txn_status(lock, read_ts, current_ts, True, bo)
        if resp.HasField("error"):
            raise UpstreamError(
                f"CheckTxnStatus for lock of txn {lock.lock_version} on key {lock.key.hex()} "
                f"(primary {lock.primary_lock.hex()}): {_key_error(resp.error)}"
            )
        if resp.commit_version:
            self._remember(lock.lock_version, resp.commit_version)
            self._clean_up(lock, resp.commit_version, bo)
            return _Final(resp.commit_version)
        if resp.lock_ttl == 0:
            self._remember(lock.lock_version, ROLLED_BACK)
            self._clean_up(lock, ROLLED_BACK, bo)
            return _Final(ROLLED_BACK)
        if resp.action == kvrpcpb_pb2.MinCommitTSPushed:
            return _Pushed()  # safe to read past, for this read ts only
        if resp.lock_info.use_async_commit and current_ts != _MAX_UINT64 and _expired(resp.lock_info, current_ts):
            commit_ts = self._async_commit_outcome(resp.lock_info, bo)
            self._remember(lock.lock_version, commit_ts)
            self._clean_up(lock, commit_ts, bo)
            return _Final(commit_ts)
        return _Alive(_ms_before_expired(lock, resp.lock_ttl, current_ts))

    def _async_commit_outcome(self, primary: kvrpcpb_pb2.LockInfo, bo: Backoffer) -> int:
        """Commit ts of an async-commit txn from all its keys (client-go `checkAllSecondaries`):
        committed if any key is, rolled back if any key holds no lock (CheckSecondaryLocks then
        writes a rollback record there, so it can never commit), else committed at the largest
        min_commit_ts of its locks."""
        commit_ts = 0
        for key in [primary.primary_lock, *primary.secondaries]:
            def build(_region, ctx, key=key):
                return kvrpcpb_pb2.CheckSecondaryLocksRequest(context=ctx, keys=[key],
                                                              start_version=primary.lock_version)

            resp, _ = self._sender.send(key, "KvCheckSecondaryLocks", build, bo)
            if resp.HasField("error"):
                raise UpstreamError(f"CheckSecondaryLocks of txn {primary.lock_version} on {key.hex()}: "
                                    f"{_key_error(resp.error)}")
            if resp.commit_ts:
                return resp.commit_ts
            if not resp.locks:
                return ROLLED_BACK
            commit_ts = max(commit_ts, *(lk.min_commit_ts for lk in resp.locks))
        return commit_ts

    def _check_txn_status(self, lock: kvrpcpb_pb2.LockInfo, read_ts: int, current_ts: int,
                          rollback_if_not_exist: bool, bo: Backoffer) -> kvrpcpb_pb2.CheckTxnStatusResponse:
        def build(_region, ctx):
            return kvrpcpb_pb2.CheckTxnStatusRequest(
                context=ctx,
                primary_key=lock.primary_lock,
                lock_ts=lock.lock_version,
                caller_start_ts=read_ts,
                current_ts=current_ts,
                rollback_if_not_exist=rollback_if_not_exist,
                verify_is_primary=True,
            )

        # Sent to the PRIMARY key's region (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader step 2).
        resp, _ = self._sender.send(lock.primary_lock, "KvCheckTxnStatus", build, bo)
        return resp

    def _clean_up(self, lock: kvrpcpb_pb2.LockInfo, commit_ts: int, bo: Backoffer) -> None:
        """ResolveLock for a decided txn, so its locks stop blocking readers and CDC resolved ts.

        As client-go's resolveLock: a classic txn's locks are resolved for the whole region at
        once (no keys), once per txn and region; an async-commit lock by its key."""
        if not self._cleanup:
            return
        region_wide = not lock.use_async_commit
        if region_wide:
            try:
                done = (lock.lock_version, self._sender.cache.locate(lock.key).id)
            except RegionMiss:
                done = None  # send() backs off on it; no dedup this time
            with self._lock:
                if done in self._cleaned:
                    return

        def build(_region, ctx):
            return kvrpcpb_pb2.ResolveLockRequest(
                context=ctx, start_version=lock.lock_version, commit_version=commit_ts,
                keys=[] if region_wide else [lock.key],
            )

        try:
            resp, region = self._sender.send(lock.key, "KvResolveLock", build, bo)
        except UpstreamError as exc:
            log.warning("could not clean up lock of txn %d on %s: %s", lock.lock_version, lock.key.hex(), exc)
            return
        if resp.HasField("error"):
            log.warning("ResolveLock of txn %d on %s: %s", lock.lock_version, lock.key.hex(), _key_error(resp.error))
        elif region_wide:
            with self._lock:
                # setdefault, not assignment: a second cleanup of the region (threads racing) does not make
                # the entry newer
                self._cleaned.setdefault((lock.lock_version, region.id), None)


def _expired(lock: kvrpcpb_pb2.LockInfo, current_ts: int) -> bool:
    return tso.physical_ms(lock.lock_version) + lock.lock_ttl < tso.physical_ms(current_ts)


def _ms_before_expired(lock: kvrpcpb_pb2.LockInfo, ttl_ms: int, current_ts: int) -> int:
    # docs/metadata.md#read-messages: the TTL counts from the physical part of lock_version.
    return max(0, tso.physical_ms(lock.lock_version) + ttl_ms - tso.physical_ms(current_ts))


def _key_error(err: kvrpcpb_pb2.KeyError) -> str:
    fields = [f"{fd.name}={value}" for fd, value in err.ListFields()]
    return "; ".join(fields) or "unknown key error"
