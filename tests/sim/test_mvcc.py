"""Percolator semantics of the simulator's MvccStore (docs/metadata.md#tikv-read-semantics, docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader, docs/metadata.md#server-semantics)."""

from __future__ import annotations

import pytest

from tidelake.sim.mvcc import (
    MAX_TS,
    ApplyBatch,
    CommitTsExpiredError,
    KeyLockedError,
    MvccStore,
    PrimaryMismatchError,
    TxnCommittedError,
    TxnLockNotFoundError,
    TxnNotFoundError,
    WriteConflictError,
)
from tidelake.tso import compose

K1, K2, K3 = b"k1", b"k2", b"k3"


def put(store: MvccStore, key: bytes, value: bytes, start_ts: int, commit_ts: int) -> None:
    store.prewrite([("put", key, value)], key, start_ts, 3000)
    store.commit([key], start_ts, commit_ts)


@pytest.fixture
def store() -> MvccStore:
    return MvccStore()


@pytest.fixture
def batches(store: MvccStore) -> list[ApplyBatch]:
    seen: list[ApplyBatch] = []
    store.add_observer(seen.append)
    return seen


def test_read_sees_newest_commit_at_or_below_ts(store):
    put(store, K1, b"a", 10, 20)
    put(store, K1, b"b", 30, 40)
    assert store.get(K1, 19) is None
    assert store.get(K1, 20) == b"a"
    assert store.get(K1, 39) == b"a"
    assert store.get_with_commit_ts(K1, 40) == (b"b", 40)


def test_delete_hides_and_rollback_records_are_skipped(store):
    put(store, K1, b"a", 10, 20)
    store.prewrite([("delete", K1, b"")], K1, 30, 3000)
    store.commit([K1], 30, 40)
    store.rollback([K1], 50)
    assert store.get(K1, 35) == b"a"
    assert store.get(K1, 100) is None


def test_lock_blocks_si_read_only_when_ts_reaches_it(store):
    store.prewrite([("put", K1, b"v")], K1, 100, 3000)
    with pytest.raises(KeyLockedError) as err:
        store.get(K1, 101)
    assert (err.value.lock.start_ts, err.value.lock.primary) == (100, K1)
    assert store.get(K1, 99) is None  # lock newer than the read
    assert store.get(K1, 100) is None  # min_commit_ts = start_ts + 1 > read ts


def test_resolved_and_committed_locks(store):
    put(store, K1, b"old", 10, 20)
    store.prewrite([("put", K1, b"new")], K1, 100, 3000)
    assert store.get(K1, 200, resolved_locks=[100]) == b"old"
    assert store.get(K1, 200, committed_locks=[100]) == b"new"
    with pytest.raises(KeyLockedError):
        store.get(K1, 200, resolved_locks=[99], committed_locks=[98])


def test_lock_type_locks_never_block_reads(store):
    put(store, K1, b"a", 10, 20)
    store.prewrite([("lock", K1, b"")], K1, 100, 3000)
    assert store.get(K1, 200) == b"a"
    store.commit([K1], 100, 110)
    assert store.get(K1, 200) == b"a"


def test_max_ts_read_of_primary_ignores_its_lock(store):
    put(store, K1, b"a", 10, 20)
    store.prewrite([("put", K1, b"b"), ("put", K2, b"c")], K1, 100, 3000)
    assert store.get(K1, MAX_TS) == b"a"
    with pytest.raises(KeyLockedError):
        store.get(K2, MAX_TS)


def test_scan_reports_locked_keys_inline_and_counts_them(store):
    for i, key in enumerate((K1, K2, K3)):
        put(store, key, b"v%d" % i, 10 + i, 20 + i)
    store.prewrite([("put", K2, b"x")], K2, 100, 3000)
    rows = store.scan(b"", b"", 200, None)
    assert [k for k, _ in rows] == [K1, K2, K3]
    assert isinstance(rows[1][1], KeyLockedError)
    assert [k for k, _ in store.scan(b"", b"", 200, 2)] == [K1, K2]
    assert store.scan(b"", b"", 200, 0) == []
    assert [k for k, _ in store.scan(K1, K3, 200, None, reverse=True)] == [K2, K1]
    assert [k for k, _ in store.scan(b"", b"", 50, None)] == [K1, K2, K3]


def test_write_conflict_when_a_newer_commit_exists(store):
    put(store, K1, b"a", 10, 50)
    with pytest.raises(WriteConflictError) as err:
        store.prewrite([("put", K1, b"b")], K1, 40, 3000)
    assert (err.value.conflict_start_ts, err.value.conflict_commit_ts, err.value.reason) == (10, 50, "Optimistic")


def test_key_locked_by_other_txn_and_prewrite_is_all_or_nothing(store):
    store.prewrite([("put", K2, b"a")], K2, 10, 3000)
    with pytest.raises(KeyLockedError):
        store.prewrite([("put", K1, b"b"), ("put", K2, b"c")], K1, 20, 3000)
    assert [lk.key for lk in store.scan_locks(b"", b"", MAX_TS)] == [K2]
    store.prewrite([("put", K2, b"a")], K2, 10, 3000)  # a retried prewrite of the holder is a no-op


def test_rollback_protects_against_a_late_prewrite(store):
    store.rollback([K1], 30)
    with pytest.raises(WriteConflictError) as err:
        store.prewrite([("put", K1, b"late")], K1, 30, 3000)
    assert err.value.reason == "SelfRolledBack"
    with pytest.raises(TxnLockNotFoundError):
        store.commit([K1], 30, 40)


def test_commit_errors_as_tikv(store):
    with pytest.raises(TxnLockNotFoundError):
        store.commit([K1], 10, 20)  # never prewritten
    store.prewrite([("put", K1, b"v")], K1, 10, 3000, min_commit_ts=25)
    with pytest.raises(CommitTsExpiredError):
        store.commit([K1], 10, 20)
    store.commit([K1], 10, 30)
    store.commit([K1], 10, 30)  # retried commit is idempotent
    with pytest.raises(TxnCommittedError):
        store.rollback([K1], 10)
    with pytest.raises(ValueError):
        store.commit([K1], 10, 10)


def test_old_values_in_apply_stream(store, batches):
    put(store, K1, b"v1", 10, 20)
    store.prewrite([("put", K1, b"v2"), ("delete", K2, b""), ("lock", K3, b"")], K1, 30, 3000)
    store.commit([K1, K2, K3], 30, 40)
    store.rollback([K3], 50)
    kinds = [b.kind for b in batches]
    assert kinds == ["prewrite", "commit", "prewrite", "commit", "rollback"]
    prewrite = {e.key: (e.op, e.value, e.old_value, e.commit_ts) for e in batches[2].entries}
    assert prewrite == {K1: ("put", b"v2", b"v1", 0), K2: ("delete", b"", b"", 0)}  # lock-type keys are not rows
    commit = {e.key: (e.commit_ts, e.old_value) for e in batches[3].entries}
    assert commit == {K1: (40, b"v1"), K2: (40, b"")}
    assert [(e.key, e.op, e.start_ts) for e in batches[4].entries] == [(K3, "rollback", 50)]


def test_one_pc_commit(store, batches):
    put(store, K1, b"v1", 10, 20)
    store.commit_one_pc([("put", K1, b"v2"), ("put", K2, b"w")], 30, 31)
    assert store.get(K1, 31) == b"v2" and store.get(K2, 31) == b"w"
    assert batches[-1].kind == "one_pc"
    assert [(e.key, e.old_value) for e in batches[-1].entries] == [(K1, b"v1"), (K2, b"")]


def test_check_txn_status_alive_pushes_min_commit_ts(store):
    start = compose(1_000_000, 1)
    store.prewrite([("put", K1, b"v")], K1, start, 5000)
    now = compose(1_000_100)
    status = store.check_txn_status(K1, start, caller_start_ts=start + 10, current_ts=now, rollback_if_not_exist=False)
    assert (status.lock_ttl, status.commit_ts, status.action) == (5000, 0, "MinCommitTSPushed")
    assert status.lock.min_commit_ts == max(start + 11, now)
    assert store.get(K1, start + 10) is None  # the reader can now proceed at its ts
    with pytest.raises(CommitTsExpiredError):
        store.commit([K1], start, start + 10)


def test_check_txn_status_ttl_expiry_rolls_back(store, batches):
    start = compose(1_000_000, 1)
    store.prewrite([("put", K1, b"v")], K1, start, 100)
    status = store.check_txn_status(K1, start, start, compose(1_000_101), False)
    assert (status.lock_ttl, status.commit_ts, status.action) == (0, 0, "TTLExpireRollback")
    assert batches[-1].kind == "rollback"
    assert store.scan_locks(b"", b"", MAX_TS) == []
    again = store.check_txn_status(K1, start, start, compose(1_000_101), False)
    assert (again.commit_ts, again.action) == (0, "NoAction")


def test_check_txn_status_committed_missing_and_mismatch(store):
    put(store, K1, b"v", 10, 20)
    assert store.check_txn_status(K1, 10, 15, 30, False).commit_ts == 20
    with pytest.raises(TxnNotFoundError):
        store.check_txn_status(K2, 40, 45, 50, False)
    status = store.check_txn_status(K2, 40, 45, 50, True)
    assert status.action == "LockNotExistRollback"
    with pytest.raises(WriteConflictError):
        store.prewrite([("put", K2, b"late")], K2, 40, 3000)
    store.prewrite([("put", K1, b"a"), ("put", K3, b"b")], K1, 60, 3000)
    with pytest.raises(PrimaryMismatchError):
        store.check_txn_status(K3, 60, 70, 80, False)


def test_resolve_lock_commits_or_rolls_back_a_txn(store):
    store.prewrite([("put", K1, b"a"), ("put", K2, b"b"), ("put", K3, b"c")], K1, 10, 3000)
    store.resolve_lock(10, 20, start=K1, end=K3)
    assert store.get(K1, 30) == b"a" and store.get(K2, 30) == b"b"
    with pytest.raises(KeyLockedError):
        store.get(K3, 30)
    store.resolve_lock(10, 0, keys=[K3])
    assert store.get(K3, 30) is None and store.scan_locks(b"", b"", MAX_TS) == []


def test_gc_keeps_newest_version_at_or_below_safe_point(store):
    put(store, K1, b"a", 10, 20)
    put(store, K1, b"b", 30, 40)
    put(store, K1, b"c", 50, 60)
    store.rollback([K1], 45)
    put(store, K2, b"x", 11, 21)
    store.prewrite([("delete", K2, b"")], K2, 31, 3000)
    store.commit([K2], 31, 41)
    removed = store.gc(50)
    assert removed == 4  # K1: v@20 and the rollback@45; K2: put@21 and the delete@41
    assert store.get(K1, 50) == b"b" and store.get(K1, 60) == b"c"
    assert store.get(K1, 25) is None  # history below the safe point is gone
    assert store.get(K2, 50) is None
    assert [k for k, _ in store.scan(b"", b"", MAX_TS, None)] == [K1]
    assert store.gc(50) == 0


def test_snapshot_delta_rows_and_old_values(store):
    put(store, K1, b"a", 10, 20)
    put(store, K1, b"b", 30, 40)
    store.rollback([K1], 45)
    store.prewrite([("put", K1, b"c")], K1, 50, 3000)
    put(store, K2, b"x", 11, 21)
    rows = store.snapshot_delta(b"", b"", 20)
    assert [(r.key, r.start_ts, r.commit_ts, r.value, r.old_value) for r in rows] == [
        (K1, 50, 0, b"c", b"b"),
        (K1, 30, 40, b"b", b"a"),
        (K2, 11, 21, b"x", b""),
    ]
    assert store.snapshot_delta(K2, b"", 21) == []


def test_min_lock_ts_and_middle_key(store):
    store.prewrite([("put", K2, b"a")], K2, 30, 3000)
    store.prewrite([("put", K3, b"a")], K3, 20, 3000)
    store.prewrite([("lock", K1, b"")], K1, 5, 3000)
    assert store.min_lock_ts(b"", b"") == 20
    assert store.min_lock_ts(b"", K3) == 30
    assert store.min_lock_ts(b"", K2) is None
    assert store.middle_key(b"", b"") == K2
    assert store.approximate_stats(K2, b"")[0] == 2


def test_one_pc_commits_above_every_observed_ts(store):
    """A read at 50 (or a resolved-ts tick at 50) must never be followed by a 1PC commit <= 50."""
    assert store.get(K1, 50) is None
    commit_ts = store.commit_one_pc([("put", K1, b"late")], 30, 31)
    assert commit_ts == 51
    assert store.get(K1, 50) is None and store.get(K1, 51) == b"late"
    store.observe_ts(70)
    assert store.commit_one_pc([("put", K2, b"x")], 60, 61) == 71


def test_reads_at_max_ts_leave_max_ts_alone(store):
    """TiKV's `update_max_ts` ignores TimeStamp::max(): a latest-version read (KvGet at u64::MAX,
    as TiDB's meta readers send) must not push every later 1PC commit ts past u64."""
    put(store, K1, b"v", 10, 11)
    assert store.get(K1, MAX_TS) == b"v"
    assert store.scan(b"", b"", MAX_TS, None) == [(K1, b"v")]
    assert store.commit_one_pc([("put", K2, b"x")], 20, 21) == 21


def test_a_range_resolve_and_batch_commits_of_a_big_txn_touch_only_its_locks_there(store):
    """Resolving a range takes the txn's locks in it only, whether the range's locks (fewer than the
    txn's) or the txn's (fewer than the range's) are scanned; committing a batch of a few of many
    locks removes exactly those from the lock index."""
    big = [b"b%04d" % i for i in range(600)]
    store.prewrite([("put", k, b"v") for k in big], big[0], 10, 3000)
    store.prewrite([("put", b"b0050x", b"o")], b"b0050x", 11, 3000)  # another txn's lock in the range
    store.resolve_lock(10, 20, start=b"b0040", end=b"b0060")  # 21 locks in the range, 600 in the txn
    assert store.get(b"b0045", 30) == b"v"
    with pytest.raises(KeyLockedError):
        store.get(b"b0060", 30)  # past the range: still locked
    store.commit(big[100:200], 10, 20)  # 100 of the 581 locks left
    store.resolve_lock(11, 0, start=b"", end=b"")  # 1 lock in the txn, 481 in the range
    left = [lock.key for lock in store.scan_locks(b"", b"", MAX_TS)]
    assert left == big[:40] + big[60:100] + big[200:]
    assert store.get(b"b0050x", 30) is None and store.get(b"b0150", 30) == b"v"
