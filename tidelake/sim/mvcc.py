"""Percolator MVCC over raw keys: the one logical keyspace every simulated store serves.

It copies TiKV's transaction layer closely enough that a client written against it works against a
real cluster: locks and write records, write conflicts, protected rollbacks, SI reads with
resolved/committed locks (docs/metadata.md#tikv-read-semantics), CheckTxnStatus/ResolveLock (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader), TiDB's
transaction protocol (pessimistic locks, async commit, 1PC; docs/wire.md#transactional-writes), GC that
keeps the newest version at or below the safe point (docs/metadata.md#server-semantics), and an apply stream with old values that
the CDC servicer observes like TiKV's raft apply (docs/wire.md#incremental-scan).

Keys are raw: memcomparable encoding preserves order, so raw order equals the encoded order TiKV uses.
"""

from __future__ import annotations

import threading
from bisect import bisect_right, insort
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Callable, Iterable, Literal

from sortedcontainers import SortedList

from tidelake.tso import physical_ms

MAX_TS = (1 << 64) - 1

MutationOp = Literal["put", "delete", "lock"]
# "pessimistic": a pessimistic lock not yet prewritten; it blocks writers only and never reaches CDC.
LockOp = Literal["put", "delete", "lock", "pessimistic"]
WriteOp = Literal["put", "delete", "rollback", "lock"]

_commit_ts_of = attrgetter("commit_ts")


@dataclass(slots=True)
class Lock:
    key: bytes
    primary: bytes
    start_ts: int
    op: LockOp
    value: bytes
    ttl_ms: int
    min_commit_ts: int
    txn_size: int
    old_value: bytes
    for_update_ts: int = 0  # > 0: the lock belongs to a pessimistic transaction
    use_async_commit: bool = False
    secondaries: tuple[bytes, ...] = ()  # async commit: every other key, on the primary's lock only

    def is_data_lock(self) -> bool:
        """A Put/Delete lock: what CDC reports as a prewrite and what holds a region's resolved ts."""
        return self.op in ("put", "delete")


@dataclass(slots=True)
class Write:
    start_ts: int
    commit_ts: int
    op: WriteOp
    value: bytes
    # TiKV's `has_overlapped_rollback`: a rollback of the txn whose start_ts equals this commit_ts.
    overlapped_rollback: bool = False


@dataclass(slots=True)
class ApplyEntry:
    key: bytes
    start_ts: int
    commit_ts: int  # 0 for a prewrite row
    op: Literal["put", "delete", "rollback"]
    value: bytes
    old_value: bytes  # value visible before this txn; b"" = the key did not exist


@dataclass(slots=True)
class ApplyBatch:
    kind: Literal["prewrite", "commit", "rollback", "one_pc"]
    entries: list[ApplyEntry]


@dataclass(frozen=True, slots=True)
class TxnStatus:
    """CheckTxnStatus result: locked <=> lock_ttl > 0; committed <=> commit_ts > 0; else rolled back."""

    lock_ttl: int
    commit_ts: int
    action: Literal["NoAction", "TTLExpireRollback", "LockNotExistRollback", "MinCommitTSPushed",
                    "TTLExpirePessimisticRollback", "LockNotExistDoNothing"]
    lock: Lock | None


@dataclass(frozen=True, slots=True)
class PrewriteResult:
    """KvPrewrite's answer: async commit's min_commit_ts (0 = fall back to 2PC) and 1PC's commit ts (0 = not 1PC)."""

    min_commit_ts: int = 0
    one_pc_commit_ts: int = 0


@dataclass(frozen=True, slots=True)
class PessimisticLockResult:
    """Per key of KvPessimisticLock: the latest value, whether the key exists, and the conflict it was locked over."""

    value: bytes
    exists: bool
    locked_with_conflict_ts: int = 0


@dataclass(frozen=True, slots=True)
class SecondaryLocksStatus:
    """KvCheckSecondaryLocks: committed at commit_ts > 0; else all still locked (locks) or rolled back (none)."""

    locks: list[Lock]
    commit_ts: int


class MvccError(Exception):
    """A transactional error TiKV reports as a kvrpcpb.KeyError."""


class KeyLockedError(MvccError):
    def __init__(self, lock: Lock) -> None:
        super().__init__(f"key {lock.key.hex()} is locked by txn {lock.start_ts}")
        self.lock = lock


class WriteConflictError(MvccError):
    def __init__(self, start_ts: int, conflict_start_ts: int, conflict_commit_ts: int, key: bytes,
                 primary: bytes, reason: Literal["Optimistic", "SelfRolledBack", "PessimisticRetry"]) -> None:
        super().__init__(f"write conflict on {key.hex()}: txn {start_ts} vs commit {conflict_commit_ts} ({reason})")
        self.start_ts = start_ts
        self.conflict_start_ts = conflict_start_ts
        self.conflict_commit_ts = conflict_commit_ts
        self.key = key
        self.primary = primary
        self.reason = reason


class TxnLockNotFoundError(MvccError):
    """Commit of a key whose lock is gone and that was never committed (rolled back or missing)."""

    def __init__(self, key: bytes, start_ts: int) -> None:
        super().__init__(f"txn {start_ts} has no lock on {key.hex()} and no commit record")
        self.key = key
        self.start_ts = start_ts


class CommitTsExpiredError(MvccError):
    def __init__(self, key: bytes, start_ts: int, commit_ts: int, min_commit_ts: int) -> None:
        super().__init__(f"commit ts {commit_ts} of txn {start_ts} is below min_commit_ts {min_commit_ts}")
        self.key = key
        self.start_ts = start_ts
        self.commit_ts = commit_ts
        self.min_commit_ts = min_commit_ts


class TxnCommittedError(MvccError):
    """Rollback of a txn that already committed this key (TiKV `Committed`, reported as abort)."""

    def __init__(self, key: bytes, start_ts: int, commit_ts: int) -> None:
        super().__init__(f"txn {start_ts} already committed {key.hex()} at {commit_ts}")
        self.key = key
        self.start_ts = start_ts
        self.commit_ts = commit_ts


class TxnNotFoundError(MvccError):
    def __init__(self, start_ts: int, primary: bytes) -> None:
        super().__init__(f"txn {start_ts} not found on primary {primary.hex()}")
        self.start_ts = start_ts
        self.primary = primary


class PessimisticLockNotFoundError(MvccError):
    """Prewrite of a key a pessimistic txn should have locked but holds no lock on (TiKV `PessimisticLockNotFound`)."""

    def __init__(self, key: bytes, start_ts: int) -> None:
        super().__init__(f"PessimisticLockNotFound: txn {start_ts} holds no pessimistic lock on {key.hex()}")
        self.key = key


class PessimisticLockRolledBackError(MvccError):
    """Pessimistic lock of a key this txn already rolled back (TiKV `PessimisticLockRolledBack`)."""

    def __init__(self, key: bytes, start_ts: int) -> None:
        super().__init__(f"PessimisticLockRolledBack: txn {start_ts} was rolled back on {key.hex()}")
        self.key = key


class PrimaryMismatchError(MvccError):
    def __init__(self, lock: Lock) -> None:
        super().__init__(f"lock on {lock.key.hex()} has primary {lock.primary.hex()}")
        self.lock = lock


Observer = Callable[[ApplyBatch], None]


class MvccStore:
    def __init__(self) -> None:
        self._mu = threading.RLock()
        # TiKV's concurrency-manager max_ts: the highest ts any reader or the CDC resolved-ts
        # advancer has observed. A 1PC commit must land above it, or a snapshot read at T (or a
        # resolved ts already sent) would miss a commit <= T (docs/metadata.md#tikv-read-semantics).
        self._max_ts = 0
        self._keys = SortedList()  # every key with a write record or a lock
        self._writes: dict[bytes, list[Write]] = {}  # ascending commit_ts
        self._locks: dict[bytes, Lock] = {}
        self._lock_keys = SortedList()
        self._txn_locks: dict[int, set[bytes]] = {}
        self._gc_candidates: set[bytes] = set()  # keys with more than one version or a non-put one
        self._observers: list[Observer] = []
        self._stored_bytes = 0  # keys + values of every write record (all versions), like SST size

    # ---- observers -------------------------------------------------------------------------

    def add_observer(self, fn: Observer) -> None:
        with self._mu:
            self._observers.append(fn)

    def remove_observer(self, fn: Observer) -> None:
        with self._mu:
            self._observers.remove(fn)

    def _notify(self, kind: str, entries: list[ApplyEntry]) -> None:
        if not entries:
            return
        batch = ApplyBatch(kind, entries)
        for fn in list(self._observers):
            fn(batch)

    # ---- writes ----------------------------------------------------------------------------

    def prewrite(self, mutations: list[tuple[MutationOp, bytes, bytes]], primary: bytes, start_ts: int,
                 ttl_ms: int, *, min_commit_ts: int | None = None, txn_size: int | None = None,
                 for_update_ts: int = 0, pessimistic_keys: frozenset[bytes] = frozenset(),
                 use_async_commit: bool = False, secondaries: tuple[bytes, ...] = (), try_one_pc: bool = False,
                 max_commit_ts: int = 0) -> PrewriteResult:
        """Lock every key or none (TiKV discards the whole batch on any key error).

        A pessimistic txn (for_update_ts > 0) must already hold a pessimistic lock on each of
        `pessimistic_keys` (which the prewrite turns into a data lock); its other keys skip conflict
        checks. Async commit and 1PC take min_commit_ts = max(start_ts, for_update_ts, max_ts) + 1, as
        TiKV's prewrite does, and fall back to a plain 2PC prewrite above `max_commit_ts`
        (tikv src/storage/txn/commands/prewrite.rs, actions/prewrite.rs).
        """
        with self._mu:
            planned: list[Lock] = []
            replaced: list[Lock] = []  # our pessimistic locks that the prewrite turns into data locks
            seen: set[bytes] = set()
            for op, key, value in mutations:
                if op not in ("put", "delete", "lock"):
                    raise ValueError(f"unknown mutation op {op!r}")
                if key in seen:
                    raise ValueError(f"key {key.hex()} appears twice in one prewrite")
                seen.add(key)
                own = self._locks.get(key)
                if own is not None and own.start_ts == start_ts:
                    if own.op != "pessimistic":
                        continue  # a retried prewrite
                    replaced.append(own)
                elif for_update_ts and key in pessimistic_keys:
                    if own is not None:
                        raise KeyLockedError(replace(own))
                    raise PessimisticLockNotFoundError(key, start_ts)
                elif for_update_ts:
                    if own is not None:
                        raise KeyLockedError(replace(own))
                elif not self._check_prewrite(key, primary, start_ts):
                    continue
                planned.append(Lock(key, primary, start_ts, op, value if op == "put" else b"", ttl_ms,
                                    min_commit_ts if min_commit_ts is not None else start_ts + 1,
                                    txn_size if txn_size is not None else len(mutations),
                                    self._visible_value(key, max(start_ts, for_update_ts)), for_update_ts))
            result = PrewriteResult()
            if use_async_commit or try_one_pc:
                final = max(start_ts, for_update_ts, self._max_ts) + 1
                final = max(final, min_commit_ts or 0)
                if max_commit_ts and final > max_commit_ts:
                    use_async_commit = try_one_pc = False  # CommitTsTooLarge: fall back to 2PC
                else:
                    result = PrewriteResult(min_commit_ts=final if use_async_commit and not try_one_pc else 0,
                                            one_pc_commit_ts=final if try_one_pc else 0)
                    for lock in planned:
                        lock.min_commit_ts = final
            if try_one_pc:
                self._commit_directly(planned, start_ts, result.one_pc_commit_ts)
                self._drop_locks(replaced)
                return result
            if use_async_commit:
                for lock in planned:
                    lock.use_async_commit = True
                    if lock.key == primary:
                        lock.secondaries = tuple(secondaries)
            self._drop_locks(replaced)
            self._add_locks(planned)
            self._notify("prewrite", [ApplyEntry(lk.key, start_ts, 0, lk.op, lk.value, lk.old_value)
                                      for lk in planned if lk.is_data_lock()])
            return result

    def _commit_directly(self, locks: list[Lock], start_ts: int, commit_ts: int) -> None:
        """1PC: the planned locks become write records at commit_ts with no lock in between."""
        entries = []
        for lock in locks:
            old = self._visible_value(lock.key, commit_ts - 1)  # docs/wire.md#old-value: 1PC old value
            self._insert_write(lock.key, Write(start_ts, commit_ts, lock.op, lock.value))
            if lock.is_data_lock():
                entries.append(ApplyEntry(lock.key, start_ts, commit_ts, lock.op, lock.value, old))
        self._notify("one_pc", entries)

    def pessimistic_lock(self, keys: list[bytes], primary: bytes, start_ts: int, for_update_ts: int, ttl_ms: int,
                         *, lock_only_if_exists: bool = False, allow_lock_with_conflict: bool = False,
                         min_commit_ts: int = 0) -> list[PessimisticLockResult]:
        """TiKV `acquire_pessimistic_lock`, all keys or none; never waits (a held lock is KeyIsLocked at once).

        A key committed after for_update_ts is a write conflict, or, with allow_lock_with_conflict
        (WakeUpModeForceLock), locked anyway at that commit ts. Reads the latest version, so it raises
        max_ts to for_update_ts (tikv src/storage/txn/actions/acquire_pessimistic_lock.rs).
        """
        with self._mu:
            self._raise_max_ts(for_update_ts)
            results: list[PessimisticLockResult] = []
            planned: list[Lock] = []
            bumped: list[tuple[Lock, int]] = []
            for key in keys:
                lock = self._locks.get(key)
                if lock is not None and lock.start_ts != start_ts:
                    raise KeyLockedError(replace(lock))
                record = self._commit_record(key, start_ts)
                if record is not None and _is_rollback_of(record, start_ts):
                    raise PessimisticLockRolledBackError(key, start_ts)
                ws = self._writes.get(key, ())
                newest_commit = ws[-1].commit_ts if ws else 0
                conflict_ts = 0
                if lock is None and newest_commit > for_update_ts:
                    if not allow_lock_with_conflict:
                        newest = ws[-1]
                        raise WriteConflictError(start_ts, newest.start_ts, newest.commit_ts, key, primary,
                                                 "PessimisticRetry")
                    conflict_ts = newest_commit
                value = self._visible_value(key, MAX_TS)
                exists = self._read(key, MAX_TS - 1, frozenset([start_ts]), frozenset())[0] is not None
                results.append(PessimisticLockResult(value, exists, conflict_ts))
                if lock is not None:
                    if lock.op == "pessimistic":
                        bumped.append((lock, max(lock.for_update_ts, for_update_ts)))
                    continue
                if lock_only_if_exists and not exists:
                    continue
                planned.append(Lock(key, primary, start_ts, "pessimistic", b"", ttl_ms, min_commit_ts, 0, b"",
                                    max(for_update_ts, conflict_ts)))
            for lock, ts in bumped:
                lock.for_update_ts = ts
            self._add_locks(planned)
            return results

    def pessimistic_rollback(self, keys: list[bytes], start_ts: int, for_update_ts: int) -> None:
        """Drop this txn's pessimistic locks taken at or below for_update_ts; no write record, nothing for CDC."""
        with self._mu:
            self._drop_locks([lk for k in keys if (lk := self._locks.get(k)) is not None and lk.start_ts == start_ts
                              and lk.op == "pessimistic" and lk.for_update_ts <= for_update_ts])

    def txn_heart_beat(self, primary: bytes, start_ts: int, advise_ttl_ms: int) -> int:
        """TiKV `TxnHeartBeat`: extend the primary lock's TTL (never shorten it); returns the TTL now set."""
        with self._mu:
            lock = self._locks.get(primary)
            if lock is None or lock.start_ts != start_ts:
                raise TxnNotFoundError(start_ts, primary)
            lock.ttl_ms = max(lock.ttl_ms, advise_ttl_ms)
            return lock.ttl_ms

    def cleanup(self, key: bytes, start_ts: int, current_ts: int) -> None:
        """TiKV `Cleanup`: roll back the txn on `key` unless its lock is still alive (current_ts 0 = any TTL).

        Raises KeyLockedError for a live lock and TxnCommittedError when the key is already committed.
        """
        with self._mu:
            lock = self._locks.get(key)
            if (lock is not None and lock.start_ts == start_ts and current_ts
                    and physical_ms(lock.start_ts) + lock.ttl_ms >= physical_ms(current_ts)):
                raise KeyLockedError(replace(lock))
            self.rollback([key], start_ts)

    def check_secondary_locks(self, keys: list[bytes], start_ts: int) -> SecondaryLocksStatus:
        """TiKV `CheckSecondaryLocks` for an async-commit txn: a missing lock gets a rollback record so
        the txn can never commit there later, and a pessimistic lock is rolled back
        (tikv src/storage/txn/commands/check_secondary_locks.rs)."""
        with self._mu:
            locks: list[Lock] = []
            rolled_back = False
            entries: list[ApplyEntry] = []
            for key in keys:
                lock = self._locks.get(key)
                if lock is not None and lock.start_ts == start_ts and lock.op != "pessimistic":
                    locks.append(replace(lock))
                    continue
                record = self._commit_record(key, start_ts) if lock is None or lock.start_ts != start_ts else None
                if record is not None and not _is_rollback_of(record, start_ts):
                    self._notify("rollback", entries)
                    return SecondaryLocksStatus([], record.commit_ts)
                rolled_back = True
                if record is None:
                    entry = self._rollback_key(key, start_ts)
                    if entry is not None:
                        entries.append(entry)
            self._notify("rollback", entries)
            return SecondaryLocksStatus([] if rolled_back else locks, 0)

    def resolve_async_commit(self, primary_lock: Lock) -> int:
        """Decide an async-commit txn from all its locks, as client-go's `resolveAsyncCommitLock` does:
        committed if any key committed, rolled back if any key lost its lock, else committed at the
        largest min_commit_ts. Returns the commit ts (0 = rolled back) after resolving every key."""
        with self._mu:
            keys = [primary_lock.primary, *primary_lock.secondaries]
            status = self.check_secondary_locks(keys, primary_lock.start_ts)
            commit_ts = status.commit_ts
            if not commit_ts and status.locks:
                commit_ts = max(lk.min_commit_ts for lk in status.locks)
            held = [k for k in keys if self._has_lock(k, primary_lock.start_ts)]
            if held:
                self.resolve_lock(primary_lock.start_ts, commit_ts, keys=held)
            return commit_ts

    def _has_lock(self, key: bytes, start_ts: int) -> bool:
        lock = self._locks.get(key)
        return lock is not None and lock.start_ts == start_ts

    def observe_ts(self, ts: int) -> None:
        """Raise max_ts to `ts` (what a read at `ts` or a resolved-ts tick at `ts` does in TiKV)."""
        with self._mu:
            self._raise_max_ts(ts)

    def _raise_max_ts(self, ts: int) -> None:
        # TiKV ConcurrencyManager::update_max_ts ignores TimeStamp::max() (a latest-version read);
        # counting it would push every later 1PC commit ts past u64.
        if ts != MAX_TS:
            self._max_ts = max(self._max_ts, ts)

    def commit_one_pc(self, mutations: list[tuple[MutationOp, bytes, bytes]], start_ts: int,
                      commit_ts: int) -> int:
        """1PC: prewrite checks, then write records directly with no lock in between.

        Returns the commit ts used: `commit_ts`, raised above max_ts as TiKV computes it, so no
        reader or resolved ts that already saw a later ts can miss this commit.
        """
        if commit_ts <= start_ts:
            raise ValueError(f"commit ts {commit_ts} must exceed start ts {start_ts}")
        with self._mu:
            commit_ts = max(commit_ts, self._max_ts + 1)
            primary = mutations[0][1] if mutations else b""
            for _op, key, _value in mutations:
                if not self._check_prewrite(key, primary, start_ts):
                    raise KeyLockedError(self._locks[key])
            self._commit_directly([Lock(key, primary, start_ts, op, value if op == "put" else b"", 0, 0, 0, b"")
                                   for op, key, value in mutations], start_ts, commit_ts)
            return commit_ts

    def commit(self, keys: list[bytes], start_ts: int, commit_ts: int) -> None:
        if commit_ts <= start_ts:
            raise ValueError(f"commit ts {commit_ts} must exceed start ts {start_ts}")
        with self._mu:
            locks = []
            stale: list[Lock] = []  # tikv actions/commit.rs: a leftover pessimistic lock is removed, not committed
            for key in keys:
                lock = self._locks.get(key)
                if lock is not None and lock.start_ts == start_ts and lock.op == "pessimistic":
                    stale.append(lock)
                    continue
                if lock is not None and lock.start_ts == start_ts:
                    if commit_ts < lock.min_commit_ts:
                        raise CommitTsExpiredError(key, start_ts, commit_ts, lock.min_commit_ts)
                    locks.append(lock)
                    continue
                record = self._commit_record(key, start_ts)
                if record is None or _is_rollback_of(record, start_ts):
                    raise TxnLockNotFoundError(key, start_ts)
                # already committed: a retried commit is a no-op, as in TiKV
            entries = []
            for lock in locks:
                self._insert_write(lock.key, Write(start_ts, commit_ts, lock.op, lock.value))
                if lock.op != "lock":
                    entries.append(ApplyEntry(lock.key, start_ts, commit_ts, lock.op, lock.value, lock.old_value))
            self._remove_locks(locks)
            self._drop_locks(stale)
            self._notify("commit", entries)

    def rollback(self, keys: list[bytes], start_ts: int) -> None:
        """Roll back a txn; a key never prewritten still gets a rollback record so a late prewrite fails."""
        with self._mu:
            for key in keys:
                lock = self._locks.get(key)
                if lock is not None and lock.start_ts == start_ts:
                    continue
                record = self._commit_record(key, start_ts)
                if record is not None and not _is_rollback_of(record, start_ts):
                    raise TxnCommittedError(key, start_ts, record.commit_ts)
            entries = []
            for key in keys:
                entry = self._rollback_key(key, start_ts)
                if entry is not None:
                    entries.append(entry)
            self._notify("rollback", entries)

    def resolve_lock(self, start_ts: int, commit_ts: int, keys: list[bytes] | None = None,
                     start: bytes | None = None, end: bytes | None = None) -> None:
        """Commit (commit_ts > 0) or roll back txn `start_ts`: the given keys, or all its locks in [start, end)."""
        with self._mu:
            if keys is None:
                keys = self._txn_locks_in_range(start_ts, start, end)
            if commit_ts:
                self.commit(keys, start_ts, commit_ts)
            else:
                self.rollback(keys, start_ts)

    def check_txn_status(self, primary: bytes, lock_ts: int, caller_start_ts: int, current_ts: int,
                         rollback_if_not_exist: bool, *, verify_is_primary: bool = True,
                         force_sync_commit: bool = False, resolving_pessimistic_lock: bool = False) -> TxnStatus:
        """TiKV `check_txn_status` (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader step 3; docs/wire.md#transactional-writes).

        An async-commit primary is reported as it is, never rolled back or pushed: its fate is decided
        from all its keys (CheckSecondaryLocks). An expired pessimistic lock is only dropped when the
        caller resolves pessimistic locks.
        """
        with self._mu:
            lock = self._locks.get(primary)
            if lock is not None and lock.start_ts == lock_ts:
                if verify_is_primary and lock.primary != primary:
                    raise PrimaryMismatchError(replace(lock))
                if lock.use_async_commit and not force_sync_commit:
                    return TxnStatus(lock.ttl_ms, 0, "NoAction", replace(lock))
                if physical_ms(lock.start_ts) + lock.ttl_ms < physical_ms(current_ts):
                    if resolving_pessimistic_lock and lock.op == "pessimistic":
                        self._drop_locks([lock])
                        return TxnStatus(0, 0, "TTLExpirePessimisticRollback", None)
                    self._notify("rollback", [self._rollback_key(primary, lock_ts)])
                    return TxnStatus(0, 0, "TTLExpireRollback", None)
                if lock.min_commit_ts and caller_start_ts != MAX_TS and caller_start_ts >= lock.min_commit_ts:
                    lock.min_commit_ts = max(caller_start_ts + 1, current_ts)
                pushed = lock.min_commit_ts and lock.min_commit_ts > caller_start_ts
                return TxnStatus(lock.ttl_ms, 0, "MinCommitTSPushed" if pushed else "NoAction", replace(lock))
            record = self._commit_record(primary, lock_ts)
            if record is not None:
                committed = not _is_rollback_of(record, lock_ts)
                return TxnStatus(0, record.commit_ts if committed else 0, "NoAction", None)
            if rollback_if_not_exist and resolving_pessimistic_lock:
                return TxnStatus(0, 0, "LockNotExistDoNothing", None)
            if rollback_if_not_exist:
                self._notify("rollback", [self._rollback_key(primary, lock_ts)])
                return TxnStatus(0, 0, "LockNotExistRollback", None)
            raise TxnNotFoundError(lock_ts, primary)

    def gc(self, safe_point: int) -> int:
        """Drop versions no read at ts >= safe_point can see; returns how many write records went."""
        with self._mu:
            removed = 0
            for key in list(self._gc_candidates):
                ws = self._writes[key]
                below = bisect_right(ws, safe_point, key=_commit_ts_of)
                kept: list[Write] = []
                for w in reversed(ws[:below]):
                    if w.op == "put":
                        kept = [w]  # newest put at or below the safe point stays; older versions go
                        break
                    if w.op == "delete":
                        break  # a delete at the safe point hides everything older: drop it too
                    # rollback / lock records at or below the safe point go
                kept.extend(ws[below:])
                if len(kept) == len(ws):
                    continue
                removed += len(ws) - len(kept)
                kept_ids = {id(w) for w in kept}
                self._stored_bytes -= sum(len(key) + len(w.value) for w in ws if id(w) not in kept_ids)
                if kept:
                    self._writes[key] = kept
                    if len(kept) == 1 and kept[0].op == "put":
                        self._gc_candidates.discard(key)
                else:
                    del self._writes[key]
                    self._gc_candidates.discard(key)
                    self._forget_if_empty(key)
            return removed

    # ---- reads -----------------------------------------------------------------------------

    def get(self, key: bytes, ts: int, resolved_locks: Iterable[int] = (),
            committed_locks: Iterable[int] = ()) -> bytes | None:
        return self.get_with_commit_ts(key, ts, resolved_locks, committed_locks)[0]

    def get_with_commit_ts(self, key: bytes, ts: int, resolved_locks: Iterable[int] = (),
                           committed_locks: Iterable[int] = ()) -> tuple[bytes | None, int]:
        """(value or None, commit ts of the version read; 0 when read through a committed lock)."""
        with self._mu:
            self._raise_max_ts(ts)
            return self._read(key, ts, frozenset(resolved_locks), frozenset(committed_locks))

    def scan(self, start: bytes, end: bytes, ts: int, limit: int | None,
             resolved_locks: Iterable[int] = (), committed_locks: Iterable[int] = (),
             reverse: bool = False) -> list[tuple[bytes, bytes | KeyLockedError]]:
        """Visible pairs in [start, end) (end b"" = +inf); a locked key yields its error and the scan goes on.

        Locked entries count toward `limit`, as in TiKV's Scanner; limit 0 returns nothing.
        """
        resolved, committed = frozenset(resolved_locks), frozenset(committed_locks)
        out: list[tuple[bytes, bytes | KeyLockedError]] = []
        if limit is not None and limit <= 0:
            return out
        with self._mu:
            self._raise_max_ts(ts)
            for key in self._keys.irange(start or None, end or None, (True, False), reverse):
                try:
                    value, _ = self._read(key, ts, resolved, committed)
                except KeyLockedError as err:
                    out.append((key, err))
                else:
                    if value is None:
                        continue
                    out.append((key, value))
                if limit is not None and len(out) >= limit:
                    break
        return out

    def scan_locks(self, start: bytes, end: bytes, max_ts: int, limit: int = 0) -> list[Lock]:
        """Locks of any type with start_ts <= max_ts in [start, end) (KvScanLock; limit 0 = all)."""
        out = []
        with self._mu:
            for key in self._lock_keys.irange(start or None, end or None, (True, False)):
                lock = self._locks[key]
                if lock.start_ts <= max_ts:
                    out.append(replace(lock))
                    if limit and len(out) >= limit:
                        break
        return out

    def snapshot_delta(self, start: bytes, end: bytes, after_ts: int) -> list[ApplyEntry]:
        """Incremental-scan rows for [start, end), taken atomically (docs/wire.md#incremental-scan).

        Per key: its Put/Delete lock as a prewrite row (commit_ts 0), then its Put/Delete writes with
        commit_ts > after_ts newest first; each with the value before that version as old value.
        """
        rows: list[ApplyEntry] = []
        with self._mu:
            for key in self._keys.irange(start or None, end or None, (True, False)):
                lock = self._locks.get(key)
                if lock is not None and lock.is_data_lock():
                    rows.append(ApplyEntry(key, lock.start_ts, 0, lock.op, lock.value, lock.old_value))
                ws = self._writes.get(key, ())
                for i in range(len(ws) - 1, -1, -1):
                    w = ws[i]
                    if w.commit_ts <= after_ts:
                        break
                    if w.op in ("put", "delete"):
                        rows.append(ApplyEntry(key, w.start_ts, w.commit_ts, w.op, w.value, _value_before(ws, i)))
        return rows

    def min_lock_ts(self, start: bytes, end: bytes) -> int | None:
        """Oldest Put/Delete lock start ts in [start, end): the bound a region's resolved ts must respect."""
        with self._mu:
            tss = [self._locks[k].start_ts for k in self._lock_keys.irange(start or None, end or None, (True, False))
                   if self._locks[k].is_data_lock()]
        return min(tss) if tss else None

    def approximate_stats(self, start: bytes, end: bytes) -> tuple[int, int]:
        """(keys, approximate bytes) in [start, end), cheap enough for a split checker to poll."""
        with self._mu:
            lo = self._keys.bisect_left(start) if start else 0
            hi = self._keys.bisect_left(end) if end else len(self._keys)
            total = len(self._keys)
            keys = max(0, hi - lo)
            return keys, (self._stored_bytes * keys // total) if total else 0

    def middle_key(self, start: bytes, end: bytes) -> bytes | None:
        """The median key in [start, end), or None when fewer than two keys are there."""
        with self._mu:
            lo = self._keys.bisect_left(start) if start else 0
            hi = self._keys.bisect_left(end) if end else len(self._keys)
            if hi - lo < 2:
                return None
            return self._keys[(lo + hi) // 2]

    # ---- internals -------------------------------------------------------------------------

    def _read(self, key: bytes, ts: int, resolved: frozenset[int],
              committed: frozenset[int]) -> tuple[bytes | None, int]:
        lock = self._locks.get(key)
        if lock is not None and _lock_blocks_read(lock, key, ts, resolved):
            if lock.start_ts in committed:
                return (lock.value if lock.op == "put" else None), 0
            raise KeyLockedError(replace(lock))
        ws = self._writes.get(key)
        if not ws:
            return None, 0
        for i in range(bisect_right(ws, ts, key=_commit_ts_of) - 1, -1, -1):
            w = ws[i]
            if w.op == "put":
                return w.value, w.commit_ts
            if w.op == "delete":
                return None, w.commit_ts
        return None, 0

    def _visible_value(self, key: bytes, ts: int) -> bytes:
        """Committed value at ts, b"" when absent (the old value format of docs/wire.md#old-value)."""
        ws = self._writes.get(key)
        if not ws:
            return b""
        return _value_before(ws, bisect_right(ws, ts, key=_commit_ts_of))

    def _check_prewrite(self, key: bytes, primary: bytes, start_ts: int) -> bool:
        """Raise on a conflict; False when this txn already holds the lock (a retried prewrite)."""
        lock = self._locks.get(key)
        if lock is not None:
            if lock.start_ts == start_ts:
                return False
            raise KeyLockedError(replace(lock))
        ws = self._writes.get(key)
        if ws:
            newest = ws[-1]
            if newest.commit_ts > start_ts:
                raise WriteConflictError(start_ts, newest.start_ts, newest.commit_ts, key, primary, "Optimistic")
            if newest.commit_ts == start_ts and (newest.op == "rollback" or newest.overlapped_rollback):
                raise WriteConflictError(start_ts, newest.start_ts, newest.commit_ts, key, primary, "SelfRolledBack")
        return True

    def _commit_record(self, key: bytes, start_ts: int) -> Write | None:
        """The write record of txn start_ts on key (commit or rollback), TiKV `get_txn_commit_record`."""
        ws = self._writes.get(key, ())
        for i in range(len(ws) - 1, -1, -1):
            w = ws[i]
            if w.commit_ts < start_ts:
                break
            if w.start_ts == start_ts or (w.commit_ts == start_ts and w.overlapped_rollback):
                return w
        return None

    def _add_locks(self, locks: list[Lock]) -> None:
        new_keys = []
        for lock in locks:
            if lock.key not in self._writes:
                new_keys.append(lock.key)
            self._locks[lock.key] = lock
            self._txn_locks.setdefault(lock.start_ts, set()).add(lock.key)
        self._lock_keys.update(lk.key for lk in locks)
        self._keys.update(new_keys)

    def _txn_locks_in_range(self, start_ts: int, start: bytes | None, end: bytes | None) -> list[bytes]:
        """The keys txn `start_ts` holds locks on in [start, end), sorted: whichever is smaller is
        scanned, the txn's locks or the range's (TiKV scans the region's), so resolving one region
        of a transaction with millions of locks costs that region's locks, not all of them."""
        txn = self._txn_locks.get(start_ts, ())
        lo = self._lock_keys.bisect_left(start) if start else 0
        hi = self._lock_keys.bisect_left(end) if end else len(self._lock_keys)
        if len(txn) <= hi - lo:
            return sorted(k for k in txn if _in_range(k, start, end))
        return [k for k in self._lock_keys.islice(lo, hi) if self._locks[k].start_ts == start_ts]

    def _remove_lock(self, lock: Lock) -> None:
        self._remove_locks([lock])

    def _remove_locks(self, locks: list[Lock]) -> None:
        for lock in locks:
            del self._locks[lock.key]
            txn = self._txn_locks[lock.start_ts]
            txn.discard(lock.key)
            if not txn:
                del self._txn_locks[lock.start_ts]
        # one sort beats many single removals when they are a large share of the locks, not
        # when a commit batch removes a few of millions (a big transaction's commit)
        if len(locks) > 64 and len(locks) * 8 > len(self._lock_keys):
            self._lock_keys = SortedList(self._locks)
        else:
            for lock in locks:
                self._lock_keys.remove(lock.key)

    def _drop_locks(self, locks: list[Lock]) -> None:
        """Remove locks that leave no write record behind (pessimistic ones), forgetting keys left empty."""
        self._remove_locks(locks)
        for lock in locks:
            self._forget_if_empty(lock.key)

    def _insert_write(self, key: bytes, write: Write) -> None:
        """Callers insert before removing the key's lock, so a key is listed in _keys exactly once."""
        ws = self._writes.get(key)
        if ws is None:
            ws = self._writes[key] = []
            if key not in self._locks:
                self._keys.add(key)
        insort(ws, write, key=_commit_ts_of)
        self._stored_bytes += len(key) + len(write.value)
        if len(ws) > 1 or write.op != "put":
            self._gc_candidates.add(key)

    def _rollback_key(self, key: bytes, start_ts: int) -> ApplyEntry | None:
        lock = self._locks.get(key)
        ours = lock is not None and lock.start_ts == start_ts
        if not ours and self._commit_record(key, start_ts) is not None:
            return None  # already rolled back
        ws = self._writes.get(key, ())
        i = bisect_right(ws, start_ts, key=_commit_ts_of)
        if i and ws[i - 1].commit_ts == start_ts:
            ws[i - 1].overlapped_rollback = True  # another txn committed exactly at our start ts
        else:
            self._insert_write(key, Write(start_ts, start_ts, "rollback", b""))
        if ours:
            self._remove_lock(lock)
        return ApplyEntry(key, start_ts, 0, "rollback", b"", b"")

    def _forget_if_empty(self, key: bytes) -> None:
        if key not in self._writes and key not in self._locks:
            self._keys.remove(key)


def _lock_blocks_read(lock: Lock, key: bytes, ts: int, resolved: frozenset[int]) -> bool:
    """TiKV `check_ts_conflict_si` (docs/metadata.md#tikv-read-semantics)."""
    if lock.start_ts > ts or not lock.is_data_lock() or lock.min_commit_ts > ts or lock.start_ts in resolved:
        return False
    return not (ts == MAX_TS and key == lock.primary)


def _is_rollback_of(record: Write, start_ts: int) -> bool:
    return record.op == "rollback" or (record.commit_ts == start_ts and record.overlapped_rollback
                                       and record.start_ts != start_ts)


def _value_before(ws: list[Write], i: int) -> bytes:
    """Value of the newest Put/Delete in ws[:i] (b"" for a delete or none)."""
    for j in range(i - 1, -1, -1):
        if ws[j].op == "put":
            return ws[j].value
        if ws[j].op == "delete":
            return b""
    return b""


def _in_range(key: bytes, start: bytes | None, end: bytes | None) -> bool:
    return (not start or key >= start) and (not end or key < end)
