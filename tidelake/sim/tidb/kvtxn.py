"""A Percolator client over the simulated TiKV, driving a transaction the way client-go does for
TiDB, in TiDB's two `tidb_txn_mode`s (docs/wire.md#the-simulators-own-front-tidbs-transaction-modes):
pessimistic with async commit and 1PC, or optimistic classic 2PC. Writes go through the calls the
gRPC KV service uses, so CDC reports them as TiKV would.

More: docs/internals.md#kvtxn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any, NoReturn

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.errors import InputError, TidelakeError
from tidelake.sim.lock_waits import DeadlockError
from tidelake.sim.mvcc import (
    MAX_TS,
    CommitTsExpiredError,
    KeyLockedError,
    Lock,
    MutationOp,
    PessimisticLockNotFoundError,
    PessimisticLockRolledBackError,
    TxnNotFoundError,
    TxnStatus,
    WriteConflictError,
)
from tidelake.tso import PHYSICAL_SHIFT_BITS, physical_ms

# client-go tikv/2pc.go: defaultLockTTL, ttlFactor, ManagedLockTTL; kv/store_vars.go DefTxnCommitBatchSize
DEFAULT_LOCK_TTL_MS = 3000
TTL_FACTOR = 6000
MANAGED_LOCK_TTL_MS = 20000
COMMIT_BATCH_BYTES = 16 * 1024
MAX_BATCH_KEYS = 2048
LOCK_WAIT_LIMIT_S = 60.0
# client-go config/client.go DefaultTiKVClient: AsyncCommit{KeysLimit, TotalKeySizeLimit, SafeWindow}
ASYNC_COMMIT_KEYS_LIMIT = 256
ASYNC_COMMIT_KEY_BYTES_LIMIT = 4 * 1024
ASYNC_COMMIT_SAFE_WINDOW_MS = 2000

PESSIMISTIC = "pessimistic"
OPTIMISTIC = "optimistic"
TXN_MODES = (PESSIMISTIC, OPTIMISTIC)
DEFAULT_TXN_MODE = PESSIMISTIC  # TiDB's tidb_txn_mode default since v3.0.8

# how a committed transaction was committed (KvTxn.protocol)
ONE_PC, ASYNC_COMMIT, TWO_PC = "1pc", "async-commit", "2pc"


class TxnConflictError(TidelakeError):
    """The transaction lost a conflict (or waited too long for a lock) and was rolled back; the caller may retry it."""


def check_txn_mode(mode: str, where: str) -> str:
    """`mode` when it is a known tidb_txn_mode, else an InputError naming `where` it came from."""
    if mode not in TXN_MODES:
        raise InputError(f"{where}: unknown transaction mode {mode!r} (known: {', '.join(TXN_MODES)})")
    return mode


def lock_ttl_ms(txn_bytes: int) -> int:
    """client-go `txnLockTTL`: big transactions get a TTL growing with sqrt(size), capped."""
    if txn_bytes < COMMIT_BATCH_BYTES:
        return DEFAULT_LOCK_TTL_MS
    ttl = int(TTL_FACTOR * math.sqrt(txn_bytes / (1 << 20)))
    return min(max(ttl, DEFAULT_LOCK_TTL_MS), MANAGED_LOCK_TTL_MS)


def fits_one_batch(mutations: list[tuple[MutationOp, bytes, bytes]]) -> bool:
    """client-go `appendBatchMutationsBySize`: a batch takes mutations (in key order) until their
    key+value bytes reach txnCommitBatchSize, so one batch holds them all iff every mutation but
    the last adds up to less than that. 1PC needs a single batch (`checkOnePCFallBack`)."""
    sizes = [len(k) + len(v) for _, k, v in sorted(mutations, key=lambda m: m[1])]
    return sum(sizes[:-1]) < COMMIT_BATCH_BYTES


def async_commit_allowed(keys: list[bytes]) -> bool:
    """client-go `checkAsyncCommit`: at most KeysLimit keys of at most TotalKeySizeLimit bytes."""
    return len(keys) <= ASYNC_COMMIT_KEYS_LIMIT and sum(map(len, keys)) <= ASYNC_COMMIT_KEY_BYTES_LIMIT


class KvTxn:
    """One transaction: buffered mutations, reads, and TiDB's commit protocol for its mode."""

    def __init__(self, cluster: Any, lock_ttl_ms: int | None = None, mode: str = OPTIMISTIC) -> None:
        self._cluster = cluster
        self._mvcc = cluster.mvcc
        self._ttl_override = lock_ttl_ms
        self.mode = check_txn_mode(mode, "transaction")
        # TiDB turns async commit and 1PC on by default with pessimistic; the optimistic mode is classic 2PC
        self.pessimistic = mode == PESSIMISTIC
        self._began = time.monotonic()
        self.start_ts: int = cluster.tso.next()
        self.for_update_ts: int = 0
        self.commit_ts: int = 0
        self.protocol: str = ""  # ONE_PC / ASYNC_COMMIT / TWO_PC once committed
        self._mutations: dict[bytes, tuple[str, bytes]] = {}
        self._locked: dict[bytes, None] = {}  # keys holding our pessimistic lock, in locking order
        self._prewritten: list[bytes] = []
        self._async_ts = 0  # async commit: the largest min_commit_ts the prewrites returned
        self._done = False
        self._undo: list[tuple[bytes, tuple[str, bytes] | None]] = []  # writes since the last savepoint
        self._marks: list[list] = []  # savepoints, oldest first; the last is self._undo
        self._named: list[bool] = []

    # ---- statements ------------------------------------------------------------------------

    def begin_statement(self) -> None:
        """A pessimistic DML statement reads and locks at a fresh for_update_ts (TiDB's
        PessimisticRRTxnContextProvider takes one from PD per statement)."""
        if self.pessimistic:
            self._check_open()
            self.for_update_ts = self._cluster.tso.next()

    def put(self, key: bytes, value: bytes) -> None:
        self._check_open()
        self._lock(key)
        self._undo.append((key, self._mutations.get(key)))
        self._mutations[key] = ("put", value)

    def delete(self, key: bytes) -> None:
        self._check_open()
        self._lock(key)
        self._undo.append((key, self._mutations.get(key)))
        self._mutations[key] = ("delete", b"")

    def get(self, key: bytes) -> bytes | None:
        """Own writes first; then, pessimistic, the latest version under our lock (a DML statement's
        "current read"); optimistic, the snapshot at start_ts."""
        if key in self._mutations:
            op, value = self._mutations[key]
            return value if op == "put" else None
        if self.pessimistic:
            self._check_open()
            return self._lock(key)
        return snapshot_get(self._cluster, key, self.start_ts)

    def read(self, key: bytes) -> bytes | None:
        """A snapshot read at start_ts (a plain SELECT in any mode), own writes first; no lock."""
        if key in self._mutations:
            op, value = self._mutations[key]
            return value if op == "put" else None
        return snapshot_get(self._cluster, key, self.start_ts)

    def scan(self, start: bytes, end: bytes, at_start: bool = False) -> list[tuple[bytes, bytes]]:
        """Visible pairs in raw [start, end): the snapshot a statement reads (pessimistic: at its
        for_update_ts; optimistic or `at_start`: at start_ts), overlaid with this transaction's own writes."""
        ts = self.for_update_ts if self.pessimistic and self.for_update_ts and not at_start else self.start_ts
        pairs = dict(snapshot_scan(self._cluster, start, end, ts))
        for key, (op, value) in self._mutations.items():
            if start <= key < end:
                if op == "put":
                    pairs[key] = value
                else:
                    pairs.pop(key, None)
        return sorted(pairs.items())

    def lock_only(self, key: bytes) -> None:
        """Lock a key the transaction will not write (a unique key's index key): pessimistic, a lock
        held until commit, prewritten as Op_Lock; optimistic, nothing (the commit's check suffices)."""
        if self.pessimistic:
            self._check_open()
            self._lock(key)

    def savepoint(self, named: bool = False) -> list:
        """Mark the buffered writes so far; `rollback_to` undoes the ones after the mark. A
        statement's mark (named=False) lives until the next mark: its writes then join the named
        mark below it, if any, else are forgotten. Named marks (SAVEPOINT) nest. Pessimistic locks
        taken since stay held, as TiDB keeps them until the transaction ends."""
        if self._marks and not self._named[-1]:
            top = self._marks.pop()
            self._named.pop()
            if self._marks:
                self._marks[-1].extend(top)
        self._undo = []
        self._marks.append(self._undo)
        self._named.append(named)
        return self._undo

    def rollback_to(self, savepoint: list) -> None:
        """Undo the writes since `savepoint` (which stays, empty); later marks are gone."""
        self._check_open()
        at = next((i for i, mark in enumerate(self._marks) if mark is savepoint), None)
        if at is None:
            raise TidelakeError("the savepoint is no longer held")
        for mark in reversed(self._marks[at:]):
            for key, previous in reversed(mark):
                if previous is None:
                    self._mutations.pop(key, None)
                else:
                    self._mutations[key] = previous
            mark.clear()
        del self._marks[at + 1:], self._named[at + 1:]
        self._undo = savepoint

    @property
    def keys(self) -> list[bytes]:
        return list(self._mutations)

    def __len__(self) -> int:
        return len(self._mutations)

    # ---- pessimistic locks -----------------------------------------------------------------

    def _lock(self, key: bytes) -> bytes | None:
        """KvPessimisticLock of `key` at for_update_ts; returns its latest committed value.

        The first key locked is the primary (client-go's first LockKeys). A commit newer than
        for_update_ts is TiDB's statement retry at a newer for_update_ts; a lock held by another txn
        is waited out or resolved here, since the simulated TiKV answers at once instead of waiting,
        and a wait that would close a cycle is refused as TiKV's deadlock detector refuses it.
        """
        if not self.pessimistic:
            return None
        if not self.for_update_ts:
            self.begin_statement()
        primary = next(iter(self._locked), key)
        ttl = max(MANAGED_LOCK_TTL_MS + self._elapsed_ms(), self._ttl_override or 0)
        deadline = time.monotonic() + LOCK_WAIT_LIMIT_S
        try:
            while True:
                try:
                    [result] = self._mvcc.pessimistic_lock([key], primary, self.start_ts, self.for_update_ts, ttl)
                except WriteConflictError:
                    self.for_update_ts = self._cluster.tso.next()
                    continue
                except KeyLockedError as err:
                    if time.monotonic() > deadline:
                        self._give_up(f"lock wait timeout after {LOCK_WAIT_LIMIT_S:.0f}s: {err}", err)
                    try:
                        self._cluster.lock_waits.wait(self.start_ts, err.lock.start_ts)
                    except DeadlockError as deadlock:
                        self._give_up(str(deadlock), deadlock)
                    resolve_or_wait(self._cluster, err.lock, self.start_ts)
                    continue
                except PessimisticLockRolledBackError as err:  # our lock expired and another txn rolled us back
                    self._give_up(str(err), err)
                self._locked[key] = None
                return result.value if result.exists else None
        finally:  # however the wait ends, its wait-for edge goes, or a later request sees a false deadlock
            self._cluster.lock_waits.done(self.start_ts)

    def _give_up(self, reason: str, cause: Exception) -> NoReturn:
        self.rollback()
        raise TxnConflictError(reason) from cause

    # ---- commit ----------------------------------------------------------------------------

    def prewrite(self, *, hold: bool = False) -> None:
        """Phase one: lock every key for commit, with async commit and 1PC where client-go uses them
        (`twoPhaseCommitter.execute`). `hold=True` is a transaction that keeps its data locks until
        commit(): classic 2PC, as in TiDB only a big 2PC transaction holds them for long (readers
        push its min_commit_ts and read past it; an async-commit lock they would have to wait out)."""
        if self._prewritten or self.protocol or not (self._mutations or self._locked):
            return
        self._check_open()
        muts = self._commit_mutations()
        primary = self._primary()
        size = sum(len(k) + len(v) for _, k, v in muts)
        ttl = self._ttl_override if self._ttl_override is not None else lock_ttl_ms(size) + self._elapsed_ms()
        use_async = self.pessimistic and not hold and async_commit_allowed([k for _, k, _ in muts])
        by_region = self._by_region(muts, primary)
        one_pc = self.pessimistic and not hold and len(by_region) == 1 and fits_one_batch(muts)
        min_commit_ts = max(self.start_ts, self.for_update_ts) + 1
        max_commit_ts = 0
        if use_async or one_pc:
            # GuaranteeLinearizability (TiDB's default): above every ts handed out so far
            min_commit_ts = max(min_commit_ts, self._cluster.tso.next() + 1)
            # calculateMaxCommitTS: start ts + time since start + SafeWindow
            max_commit_ts = self.start_ts + ((self._elapsed_ms() + ASYNC_COMMIT_SAFE_WINDOW_MS) << PHYSICAL_SHIFT_BITS)
            if use_async and self.pessimistic:  # prewrite.go: the TTL outlives max_commit_ts
                ttl = max(ttl, physical_ms(max_commit_ts) - physical_ms(self.start_ts) + 1)
        secondaries = tuple(k for _, k, _ in muts if k != primary)
        for batch in self._batches(by_region):
            result = self._prewrite_batch(batch, primary, ttl, min_commit_ts, len(muts), use_async,
                                          secondaries if any(k == primary for _, k, _ in batch) else (),
                                          one_pc, max_commit_ts)
            self._prewritten.extend(k for _, k, _ in batch)
            if one_pc:
                if result.one_pc_commit_ts:
                    self._finish(result.one_pc_commit_ts, ONE_PC)
                    return
                one_pc = use_async = False  # TiKV fell back: a normal prewrite was done
            elif use_async:
                if result.min_commit_ts:
                    self._async_ts = max(self._async_ts, result.min_commit_ts)
                else:
                    use_async = False  # min_commit_ts beyond max_commit_ts: fall back to 2PC
        if not use_async:
            self._async_ts = 0

    def commit(self) -> int:
        """Commit: 1PC is done at prewrite; async commit commits every key at the largest
        min_commit_ts; 2PC commits the primary at a fresh TSO, then the secondaries."""
        if self._done:
            return self.commit_ts
        if not (self._mutations or self._locked):
            self._done = True
            return 0
        self.prewrite()
        if self.protocol:
            return self.commit_ts
        primary = self._primary()
        keys = self._prewritten
        if self._async_ts:
            self._mvcc.commit(keys, self.start_ts, self._async_ts)
            self._finish(self._async_ts, ASYNC_COMMIT)
            return self.commit_ts
        commit_ts = self._cluster.tso.next()
        while True:
            try:
                self._mvcc.commit([primary], self.start_ts, commit_ts)
                break
            except CommitTsExpiredError as err:  # a reader pushed min_commit_ts: take a newer ts
                commit_ts = max(self._cluster.tso.next(), err.min_commit_ts)
        secondaries = [k for k in keys if k != primary]
        for i in range(0, len(secondaries), MAX_BATCH_KEYS):
            self._mvcc.commit(secondaries[i : i + MAX_BATCH_KEYS], self.start_ts, commit_ts)
        self._finish(commit_ts, TWO_PC)
        return commit_ts

    def rollback(self) -> None:
        """KvBatchRollback of what was prewritten; KVPessimisticRollback of keys only locked
        (client-go `Rollback` -> `rollbackPessimisticLocks`)."""
        if self._done:
            return
        self._done = True
        if self._prewritten:
            self._mvcc.rollback(self._prewritten, self.start_ts)
        prewritten = set(self._prewritten)
        only_locked = [k for k in self._locked if k not in prewritten]
        if only_locked:
            self._mvcc.pessimistic_rollback(only_locked, self.start_ts, MAX_TS)

    # ---- internals -------------------------------------------------------------------------

    def _finish(self, commit_ts: int, protocol: str) -> None:
        self.commit_ts, self.protocol, self._done = commit_ts, protocol, True

    def _elapsed_ms(self) -> int:
        return int((time.monotonic() - self._began) * 1000)

    def _check_open(self) -> None:
        if self._done:
            raise TidelakeError(f"transaction {self.start_ts} is already finished")
        if self._prewritten:
            raise TidelakeError(f"transaction {self.start_ts} is prewritten; no more writes")

    def _primary(self) -> bytes:
        return next(iter(self._locked)) if self._locked else next(iter(self._mutations))

    def _commit_mutations(self) -> list[tuple[MutationOp, bytes, bytes]]:
        """Writes, then keys a pessimistic txn locked without writing them (prewritten as Op_Lock)."""
        muts: list[tuple[MutationOp, bytes, bytes]] = [(op, k, v) for k, (op, v) in self._mutations.items()]
        muts += [("lock", k, b"") for k in self._locked if k not in self._mutations]
        return muts

    def _by_region(self, muts: list[tuple[MutationOp, bytes, bytes]], primary: bytes
                   ) -> dict[int, list[tuple[MutationOp, bytes, bytes]]]:
        """Mutations grouped by region, the primary's region first."""
        by_region: dict[int, list[tuple[MutationOp, bytes, bytes]]] = {}
        primary_region = self._cluster.regions.locate(encode_bytes(primary)).id
        by_region[primary_region] = []
        for m in muts:
            region = self._cluster.regions.locate(encode_bytes(m[1]))
            by_region.setdefault(region.id, []).append(m)
        return {r: ms for r, ms in by_region.items() if ms}

    @staticmethod
    def _batches(by_region: dict[int, list[tuple[MutationOp, bytes, bytes]]]
                 ) -> Iterator[list[tuple[MutationOp, bytes, bytes]]]:
        """At most MAX_BATCH_KEYS mutations of one region per prewrite request."""
        for muts in by_region.values():
            for i in range(0, len(muts), MAX_BATCH_KEYS):
                yield muts[i : i + MAX_BATCH_KEYS]

    def _prewrite_batch(self, muts: list[tuple[MutationOp, bytes, bytes]], primary: bytes, ttl: int,
                        min_commit_ts: int, txn_size: int, use_async: bool, secondaries: tuple[bytes, ...],
                        one_pc: bool, max_commit_ts: int) -> Any:
        deadline = time.monotonic() + LOCK_WAIT_LIMIT_S
        locked = frozenset(k for _, k, _ in muts if k in self._locked)
        while True:
            try:
                return self._mvcc.prewrite(
                    muts, primary, self.start_ts, ttl, min_commit_ts=min_commit_ts, txn_size=txn_size,
                    for_update_ts=self.for_update_ts if self.pessimistic else 0, pessimistic_keys=locked,
                    use_async_commit=use_async, secondaries=secondaries, try_one_pc=one_pc,
                    max_commit_ts=max_commit_ts)
            except (WriteConflictError, PessimisticLockNotFoundError) as err:
                self.rollback()
                raise TxnConflictError(f"write conflict: {err}") from err
            except KeyLockedError as err:
                if time.monotonic() > deadline:
                    self.rollback()
                    raise TxnConflictError(f"key locked for over {LOCK_WAIT_LIMIT_S:.0f}s: {err}") from err
                resolve_or_wait(self._cluster, err.lock, self.start_ts)


def snapshot_get(cluster: Any, key: bytes, ts: int) -> bytes | None:
    """A point read at `ts` that waits out or resolves locks (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader)."""
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
    """A writer met a lock: clean it up if its txn is decided (or expired), else back off.

    A pessimistic lock is cleaned with KVPessimisticRollback and leaves no record, as client-go's
    `resolvePessimisticLock` does; a data lock is committed or rolled back (KvResolveLock)."""
    pessimistic = lock.op == "pessimistic"
    status = _check_status(cluster, lock, caller_ts, resolving_pessimistic_lock=pessimistic)
    if status is None or status.lock_ttl:
        _wait_for(lock)
        return
    if pessimistic:
        cluster.mvcc.pessimistic_rollback([lock.key], lock.start_ts, lock.for_update_ts or MAX_TS)
        return
    cluster.mvcc.resolve_lock(lock.start_ts, status.commit_ts, keys=[lock.key])


def _check_status(cluster: Any, lock: Lock, caller_ts: int, resolving_pessimistic_lock: bool = False) -> Any:
    current = cluster.tso.next()
    try:
        status = cluster.mvcc.check_txn_status(lock.primary, lock.start_ts, caller_ts, current, False,
                                               resolving_pessimistic_lock=resolving_pessimistic_lock)
    except TxnNotFoundError:
        expired = physical_ms(lock.start_ts) + lock.ttl_ms < physical_ms(current)
        if not expired:
            return None
        return cluster.mvcc.check_txn_status(lock.primary, lock.start_ts, caller_ts, current, True,
                                             resolving_pessimistic_lock=resolving_pessimistic_lock)
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
