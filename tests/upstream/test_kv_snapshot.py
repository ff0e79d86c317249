"""SnapshotReader against the simulated TiKV stores: consistency at a ts, region changes mid-scan,
region errors, and every lock outcome of docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader."""

from __future__ import annotations

import random
import threading
import time

import pytest
from upstream_writes import commit, rows

from tidelake.codec.keys import record_key, table_record_span, table_split_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.upstream.kv_snapshot import ScanProgress, SnapshotReader
from tidelake.upstream.region_request import RegionRequestSender
from tidelake.upstream.upstream_errors import BelowGCSafepointError

TABLE = 100


@pytest.fixture
def region_errors(monkeypatch) -> list[str]:
    """The kinds of region error the reader met (proves a test really exercised them)."""
    seen: list[str] = []
    original = RegionRequestSender._on_region_error

    def recording(self, region, peer, err, bo, hops):
        seen.append(next(fd.name for fd, _ in err.ListFields() if fd.name != "message"))
        return original(self, region, peer, err, bo, hops)

    monkeypatch.setattr(RegionRequestSender, "_on_region_error", recording)
    return seen


def expected_at(history: list[tuple[int, bytes, bytes | None]], ts: int) -> dict[bytes, bytes]:
    state: dict[bytes, bytes | None] = {}
    for commit_ts, key, value in sorted(history, key=lambda h: h[0]):
        if commit_ts <= ts:
            state[key] = value
    return {k: v for k, v in state.items() if v is not None}


def split_into(sim, table_id: int, handles: list[int]) -> None:
    sim.split_table(table_id)
    sim.split_table(table_id + 1)
    for h in handles:
        key = encode_bytes(record_key(table_id, h))
        sim.split_region(sim.regions.locate(key).id, key)


def scan_table(reader, ts, table_id=TABLE) -> dict[bytes, bytes]:
    result = list(reader.scan_table(table_id, ts))
    keys = [k for k, _ in result]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    return dict(result)


def test_consistent_scan_with_concurrent_writers(sim, reader):
    split_into(sim, TABLE, [20, 45, 70])
    history: list[tuple[int, bytes, bytes | None]] = []
    initial = rows(TABLE, range(100))
    ts0 = commit(sim, initial)
    history += [(ts0, k, v) for k, v in initial.items()]
    stop = threading.Event()
    rng = random.Random(7)

    def writer():
        n = 0
        while not stop.is_set():
            n += 1
            muts = {record_key(TABLE, rng.randrange(130)): (None if rng.random() < 0.2 else f"w{n}".encode())
                    for _ in range(3)}
            cts = commit(sim, muts)
            history.extend((cts, k, v) for k, v in muts.items())

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.05)
        read_ts = sim.tso.next()
        time.sleep(0.05)
        got = scan_table(reader, read_ts)
    finally:
        stop.set()
        thread.join()
    assert got == expected_at(history, read_ts)
    assert len(history) > len(initial)  # the writer really ran


def test_splits_merges_and_leader_moves_during_a_scan(sim, reader, region_errors):
    split_into(sim, TABLE, [50])
    data = rows(TABLE, range(120))
    commit(sim, data)
    read_ts = sim.tso.next()
    commit(sim, rows(TABLE, range(0, 120, 3), tag="late"))  # after read_ts: must stay invisible
    got: dict[bytes, bytes] = {}
    changed = 0
    for i, (key, value) in enumerate(reader.scan_table(TABLE, read_ts)):
        got[key] = value
        if i in (10, 30, 60, 90):
            # Change the region ahead of the cursor and the one holding it.
            ahead = encode_bytes(record_key(TABLE, i + 5))
            region = sim.regions.locate(ahead)
            if region.start_key < ahead:
                sim.split_region(region.id, ahead)
            here = sim.regions.locate(encode_bytes(key))
            other = next(s for _, s in here.peers if s != here.leader_store_id)
            sim.transfer_leader(here.id, other)
            changed += 1
        if i == 100:
            left = sim.regions.locate(encode_bytes(record_key(TABLE, 101)))
            right = sim.regions.locate(left.end_key) if left.end_key else None
            if right is not None and right.start_key < table_split_key(TABLE + 1):
                sim.merge_regions(left.id, right.id)
    assert changed == 4
    assert got == data
    assert "epoch_not_match" in region_errors and "not_leader" in region_errors


def test_progress_reports_regions_rows_and_bytes(sim, pd):
    split_into(sim, TABLE, [10, 20])
    data = rows(TABLE, range(30))
    commit(sim, data)
    seen: list[ScanProgress] = []
    with SnapshotReader(pd, batch_size=4, progress=seen.append) as reader:
        assert scan_table(reader, sim.tso.next()) == data
    assert [p.regions_done for p in seen] == [1, 2, 3]
    assert seen[-1].rows == 30
    assert seen[-1].bytes == sum(len(k) + len(v) for k, v in data.items())


def test_get_and_batch_get(sim, reader):
    split_into(sim, TABLE, [5])
    data = rows(TABLE, range(10))
    commit(sim, data)
    ts1 = sim.tso.next()
    commit(sim, {record_key(TABLE, 3): None, record_key(TABLE, 4): b"new"})
    ts2 = sim.tso.next()
    assert reader.get(record_key(TABLE, 3), ts1) == b"v3"
    assert reader.get(record_key(TABLE, 3), ts2) is None
    assert reader.get(record_key(TABLE, 4), ts2) == b"new"
    assert reader.get(record_key(TABLE, 99), ts2) is None
    keys = [record_key(TABLE, h) for h in (1, 3, 4, 7, 99)]
    assert reader.batch_get(keys, ts2) == {keys[0]: b"v1", keys[2]: b"new", keys[3]: b"v7"}


def test_region_errors_busy_store_and_stopped_store(sim, reader, region_errors):
    split_into(sim, TABLE, [15, 30])
    data = rows(TABLE, range(45))
    commit(sim, data)
    read_ts = sim.tso.next()
    # The store the scan asks first: a busy window on a later region could be over before a
    # loaded machine gets there.
    busy_store = sim.regions.locate(encode_bytes(record_key(TABLE, 0))).leader_store_id
    sim.faults.make_busy(busy_store, 1000)
    assert scan_table(reader, read_ts) == data
    assert "server_is_busy" in region_errors
    stopped = sim.regions.locate(encode_bytes(record_key(TABLE, 40))).leader_store_id
    sim.stop_store(stopped)
    assert scan_table(reader, read_ts) == data


def test_reads_below_the_gc_safepoint_are_refused(sim, reader):
    commit(sim, rows(TABLE, range(3)))
    old_ts = sim.tso.next()
    sim.gc_safe_points.advance_gc_safe_point(sim.tso.next())
    with pytest.raises(BelowGCSafepointError, match=f"snapshot ts {old_ts} is below the GC safepoint"):
        list(reader.scan_table(TABLE, old_ts))


# --- locks (docs/metadata.md#locks-seen-by-a-read-only-snapshot-reader) --------------------------------------------------------


def prewrite(sim, muts: dict[bytes, bytes], ttl_ms: int, primary: bytes | None = None, **kw) -> int:
    start = sim.tso.next()
    keys = list(muts)
    sim.mvcc.prewrite([("put", k, v) for k, v in muts.items()], primary or keys[0], start, ttl_ms, **kw)
    return start


def later(delay_s: float, fn) -> threading.Thread:
    thread = threading.Thread(target=lambda: (time.sleep(delay_s), fn()))
    thread.start()
    return thread


def test_secondary_lock_of_txn_committed_before_ts_is_included(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    a, b = record_key(TABLE, 2), record_key(TABLE, 8)
    start = prewrite(sim, {a: b"A", b: b"B"}, ttl_ms=60_000)
    commit_ts = sim.tso.next()
    sim.mvcc.commit([a], start, commit_ts)  # primary committed, secondary still locked
    read_ts = sim.tso.next()
    got = scan_table(reader, read_ts)
    assert got[a] == b"A" and got[b] == b"B"
    assert sim.mvcc.scan_locks(b"", b"", 1 << 63) == []  # the secondary was cleaned up


def test_waits_for_a_live_lock_that_then_commits_at_or_below_ts(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 4)
    start = prewrite(sim, {key: b"waited"}, ttl_ms=60_000, min_commit_ts=0)  # cannot be pushed
    commit_ts = sim.tso.next()
    read_ts = sim.tso.next()
    t0 = time.monotonic()
    thread = later(0.4, lambda: sim.mvcc.commit([key], start, commit_ts))
    got = scan_table(reader, read_ts)
    thread.join()
    assert got[key] == b"waited"
    assert time.monotonic() - t0 >= 0.35  # it really waited instead of skipping the lock


def test_lock_whose_txn_rolls_back_is_excluded(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 5)
    start = prewrite(sim, {key: b"doomed"}, ttl_ms=60_000, min_commit_ts=0)
    read_ts = sim.tso.next()
    thread = later(0.3, lambda: sim.mvcc.rollback([key], start))
    got = scan_table(reader, read_ts)
    thread.join()
    assert got[key] == b"v5"


def test_lock_whose_txn_commits_after_ts_is_excluded(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 6)
    start = prewrite(sim, {key: b"future"}, ttl_ms=60_000, min_commit_ts=0)
    read_ts = sim.tso.next()
    thread = later(0.3, lambda: sim.mvcc.commit([key], start, sim.tso.next()))
    got = scan_table(reader, read_ts)
    thread.join()
    assert got[key] == b"v6"


def test_pushable_lock_is_read_past_without_waiting(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 7)
    start = prewrite(sim, {key: b"pushed"}, ttl_ms=60_000)  # min_commit_ts = start + 1
    read_ts = sim.tso.next()
    t0 = time.monotonic()
    assert reader.get(key, read_ts) == b"v7"
    assert time.monotonic() - t0 < 5
    lock = sim.mvcc.scan_locks(b"", b"", 1 << 63)[0]
    assert lock.start_ts == start and lock.min_commit_ts > read_ts  # CheckTxnStatus pushed it


def test_orphan_lock_past_ttl_is_rolled_back(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 3)
    prewrite(sim, {key: b"orphan"}, ttl_ms=200)
    time.sleep(0.25)
    read_ts = sim.tso.next()
    assert scan_table(reader, read_ts)[key] == b"v3"
    assert sim.mvcc.scan_locks(b"", b"", 1 << 63) == []


def test_orphan_secondary_without_primary_is_rolled_back(sim, reader):
    commit(sim, rows(TABLE, range(10)))
    key = record_key(TABLE, 1)
    prewrite(sim, {key: b"lost"}, ttl_ms=150, primary=record_key(TABLE, 900))  # primary never written
    read_ts = sim.tso.next()
    assert reader.get(key, read_ts) == b"v1"


def test_scan_of_partitions_and_whole_record_span(sim, reader):
    for pid in (201, 202, 203):
        sim.split_table(pid)
    commit(sim, {**rows(201, range(3)), **rows(202, range(2))})
    ts = sim.tso.next()
    got = list(reader.scan_table([201, 202, 203], ts))
    assert [k for k, _ in got] == sorted(list(rows(201, range(3))) + list(rows(202, range(2))))
    start, end = table_record_span(202)
    assert dict(reader.scan(start, end, ts)) == rows(202, range(2))
    assert list(reader.scan(end, start, ts)) == []


def test_expired_async_commit_lock_is_decided_by_its_secondaries(sim, reader):
    """All keys locked: committed at the largest min_commit_ts; one key never prewritten: rolled back."""
    commit(sim, rows(TABLE, range(10)))
    a, b, c = record_key(TABLE, 2), record_key(TABLE, 8), record_key(TABLE, 9)
    split_into(sim, TABLE, [5])
    start = prewrite(sim, {a: b"A"}, ttl_ms=1, use_async_commit=True, secondaries=(b,))
    sim.mvcc.prewrite([("put", b, b"B")], a, start, 1, use_async_commit=True)
    lost = prewrite(sim, {c: b"C"}, ttl_ms=1, use_async_commit=True, secondaries=(record_key(TABLE, 3),))
    time.sleep(0.01)
    got = scan_table(reader, sim.tso.next())
    assert (got[a], got[b], got[c]) == (b"A", b"B", b"v9")
    assert sim.mvcc.get(a, sim.tso.next()) == b"A"  # the primary was committed where it was met
    late = sim.mvcc.check_secondary_locks([record_key(TABLE, 3)], lost)
    assert (late.locks, late.commit_ts) == ([], 0)  # the lost txn can never commit


def test_a_decided_txn_is_cleaned_up_in_the_whole_region_not_only_the_key_read(sim, reader):
    """client-go's resolveLock: one ResolveLock without keys clears every lock of the txn in the
    region, so keys nobody read stop holding readers and the region's CDC resolved ts."""
    commit(sim, rows(TABLE, range(10)))
    keys = [record_key(TABLE, i) for i in (2, 5, 8)]
    prewrite(sim, {k: b"orphan" for k in keys}, ttl_ms=150)
    time.sleep(0.2)
    assert reader.get(keys[1], sim.tso.next()) == b"v5"
    assert sim.mvcc.scan_locks(b"", b"", 1 << 63) == []
