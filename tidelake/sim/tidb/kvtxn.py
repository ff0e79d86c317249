"""A Percolator client over the simulated TiKV, the way client-go runs an optimistic transaction.

Prewrite every mutation grouped by region (primary batch first), then commit the primary at a
fresh TSO and the secondaries after it. Reads at start_ts resolve locks as a reader must
(docs/metadata.md §2.7), so a crashed or long writer never corrupts a read, only delays it; an
expired async-commit lock (an outside client's) is decided from all its keys (docs/wire.md §14.4).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.errors import TidelakeError
from tidelake.sim.mvcc import (
    CommitTsExpiredError,
    KeyLockedError,
    Lock,
    TxnNotFoundError,
    TxnStatus,
    WriteConflictError,
)
from tidelake.tso import physical_ms

# client-go tikv/2pc.go: defaultLockTTL, ttlFactor, ManagedLockTTL, txnCommitBatchSize
DEFAULT_LOCK_TTL_MS = 3000
TTL_FACTOR = 6000
MANAGED_LOCK_TTL_MS = 20000
COMMIT_BATCH_BYTES = 16 * 1024
MAX_BATCH_KEYS = 2048
LOCK_WAIT_LIMIT_S = 60.0


class TxnConflictError(TidelakeError):
    """The transaction lost an optimistic conflict and was rolled back; the caller may retry it."""


def lock_ttl_ms(txn_bytes: int) -> int:
    """client-go `txnLockTTL`: big transactions get a TTL growing with sqrt(size), capped."""
    if txn_bytes < COMMIT_BATCH_BYTES:
        return DEFAULT_LOCK_TTL_MS
    ttl = int(TTL_FACTOR * math.sqrt(txn_bytes / (1 << 20)))
    return min(max(ttl, DEFAULT_LOCK_TTL_MS), MANAGED_LOCK_TTL_MS)


class KvTxn:
    """One optimistic transaction: buffered mutations, snapshot reads at start_ts, 2PC on commit."""

    def __init__(self, cluster: Any, lock_ttl_ms: int | None = None) -> None:
        self._cluster = cluster
        self._mvcc = cluster.mvcc
        self._ttl_override = lock_ttl_ms
        self.start_ts: int = cluster.tso.next()
        self.commit_ts: int = 0
        self._mutations: dict[bytes, tuple[str, bytes]] = {}
        self._prewritten: list[bytes] = []
        self._done = False

    # ---- buffer ----------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        self._check_open()
        self._mutations[key] = ("put", value)

    def delete(self, key: bytes) -> None:
        self._check_open()
        self._mutations[key] = ("delete", b"")

    def get(self, key: bytes) -> bytes | None:
        """Own writes first, then the snapshot at start_ts."""
        if key in self._mutations:
            op, value = self._mutations[key]
            return value if op == "put" else None
        return snapshot_get(self._cluster, key, self.start_ts)

    @property
    def keys(self) -> list[bytes]:
        return list(self._mutations)

    def __len__(self) -> int:
        return len(self._mutations)

    # ---- two-phase commit ------------------------------------------------------------------

    def prewrite(self) -> None:
        """Phase one: lock every key. Locks stay until commit() or rollback() (long txns hold them)."""
        if self._prewritten or not self._mutations:
            return
        self._check_open()
        primary = next(iter(self._mutations))
        size = sum(len(k) + len(v) for k, (_, v) in self._mutations.items())
        ttl = self._ttl_override if self._ttl_override is not None else lock_ttl_ms(size)
        for batch in self._batches(primary):
            muts = [(self._mutations[k][0], k, self._mutations[k][1]) for k in batch]
            self._prewrite_batch(muts, primary, ttl)
            self._prewritten.extend(batch)

    def commit(self) -> int:
        """Phase two: commit the primary at a fresh TSO (the txn's commit point), then secondaries."""
        if self._done:
            return self.commit_ts
        if not self._mutations:
            self._done = True
            return 0
        self.prewrite()
        primary = next(iter(self._mutations))
        commit_ts = self._cluster.tso.next()
        while True:
            try:
                self._mvcc.commit([primary], self.start_ts, commit_ts)
                break
            except CommitTsExpiredError as err:  # a reader pushed min_commit_ts: take a newer ts
                commit_ts = max(self._cluster.tso.next(), err.min_commit_ts)
        self.commit_ts = commit_ts
        for batch in self._batches(primary):
            secondaries = [k for k in batch if k != primary]
            if secondaries:
                self._mvcc.commit(secondaries, self.start_ts, commit_ts)
        self._done = True
        return commit_ts

    def rollback(self) -> None:
        if self._done:
            return
        self._done = True
        if self._prewritten:
            self._mvcc.rollback(self._prewritten, self.start_ts)

    # ---- internals -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._done:
            raise TidelakeError(f"transaction {self.start_ts} is already finished")
        if self._prewritten:
            raise TidelakeError(f"transaction {self.start_ts} is prewritten; no more writes")

    def _batches(self, primary: bytes) -> Iterator[list[bytes]]:
        """Keys grouped by region, at most MAX_BATCH_KEYS per batch; the primary's batch first."""
        by_region: dict[int, list[bytes]] = {}
        for key in self._mutations:
            region = self._cluster.regions.locate(encode_bytes(key))
            by_region.setdefault(region.id, []).append(key)
        primary_region = self._cluster.regions.locate(encode_bytes(primary)).id
        order = [primary_region] + [r for r in by_region if r != primary_region]
        for region_id in order:
            keys = by_region[region_id]
            for i in range(0, len(keys), MAX_BATCH_KEYS):
                yield keys[i : i + MAX_BATCH_KEYS]

    def _prewrite_batch(self, muts: list[tuple[str, bytes, bytes]], primary: bytes, ttl: int) -> None:
        deadline = time.monotonic() + LOCK_WAIT_LIMIT_S
        while True:
            try:
                self._mvcc.prewrite(muts, primary, self.start_ts, ttl, txn_size=len(self._mutations))
                return
            except WriteConflictError as err:
                self.rollback()
                raise TxnConflictError(f"write conflict: {err}") from err
            except KeyLockedError as err:
                if time.monotonic() > deadline:
                    self.rollback()
                    raise TxnConflictError(f"key locked for over {LOCK_WAIT_LIMIT_S:.0f}s: {err}") from err
                resolve_or_wait(self._cluster, err.lock, self.start_ts)


def snapshot_get(cluster: Any, key: bytes, ts: int) -> bytes | None:
    """A point read at `ts` that waits out or resolves locks (docs/metadata.md §2.7)."""
    resolved: set[int] = set()
    committed: set[int] = set()
    deadline = time.monotonic() + LOCK_WAIT_LIMIT_S
    while True:
        try:
            return cluster.mvcc.get(key, ts, resolved, committed)
        except KeyLockedError as err:
            _classify_lock(cluster, err.lock, ts, resolved, committed, deadline)


def snapshot_scan(cluster: Any, start: bytes, end: bytes, ts: int) -> list[tuple[bytes, bytes]]:
    """All visible pairs in raw [start, end) at `ts`, resolving locks met on the way."""
    resolved: set[int] = set()
    committed: set[int] = set()
    deadline = time.monotonic() + LOCK_WAIT_LIMIT_S
    while True:
        pairs = cluster.mvcc.scan(start, end, ts, None, resolved, committed)
        locked = [v for _, v in pairs if isinstance(v, KeyLockedError)]
        if not locked:
            return pairs
        for err in locked:
            _classify_lock(cluster, err.lock, ts, resolved, committed, deadline)


def _classify_lock(cluster: Any, lock: Lock, ts: int, resolved: set[int], committed: set[int],
                   deadline: float) -> None:
    """Decide one lock for a reader at `ts`: read through it, skip it, or wait for it."""
    if lock.start_ts in resolved or lock.start_ts in committed:
        return
    status = _check_status(cluster, lock, ts)
    if status is None or status.lock_ttl:
        if status is not None and status.action == "MinCommitTSPushed":
            resolved.add(lock.start_ts)
            return
        if time.monotonic() > deadline:
            raise TidelakeError(f"read at {ts}: key {lock.key.hex()} stayed locked by txn {lock.start_ts}")
        _wait_for(lock)
        return
    if status.commit_ts and status.commit_ts <= ts:
        committed.add(lock.start_ts)
    else:
        resolved.add(lock.start_ts)


def resolve_or_wait(cluster: Any, lock: Lock, caller_ts: int) -> None:
    """A writer met a lock: clean it up if its txn is decided (or expired), else back off."""
    status = _check_status(cluster, lock, caller_ts)
    if status is None or status.lock_ttl:
        _wait_for(lock)
        return
    cluster.mvcc.resolve_lock(lock.start_ts, status.commit_ts, keys=[lock.key])


def _check_status(cluster: Any, lock: Lock, caller_ts: int) -> Any:
    current = cluster.tso.next()
    try:
        status = cluster.mvcc.check_txn_status(lock.primary, lock.start_ts, caller_ts, current, False)
    except TxnNotFoundError:
        expired = physical_ms(lock.start_ts) + lock.ttl_ms < physical_ms(current)
        if not expired:
            return None
        return cluster.mvcc.check_txn_status(lock.primary, lock.start_ts, caller_ts, current, True)
    primary = status.lock
    if primary is None or not primary.use_async_commit:
        return status
    if physical_ms(primary.start_ts) + primary.ttl_ms >= physical_ms(current):
        return status  # alive: wait for it like any lock
    return TxnStatus(0, cluster.mvcc.resolve_async_commit(primary), "NoAction", None)


def _wait_for(lock: Lock) -> None:
    """client-go BoTxnLockFast: short sleeps, bounded by the lock's remaining TTL."""
    remaining_ms = physical_ms(lock.start_ts) + lock.ttl_ms - int(time.time() * 1000)
    time.sleep(min(max(remaining_ms, 2), 50) / 1000)
