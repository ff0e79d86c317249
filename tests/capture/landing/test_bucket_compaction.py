"""Compaction of closed commit buckets: only closed buckets of the lander's tables are rewritten,
rows are unchanged, and flushes running at the same time neither fail nor lose a row."""

from __future__ import annotations

import threading
from collections import Counter

import pyarrow as pa
from deltalake import DeltaTable
from prometheus_client import CollectorRegistry

from tidelake.capture.landing.bucket_compaction import BucketCompactor, closed_buckets_to_compact, compact_buckets
from tidelake.capture.landing.lander import Lander
from tidelake.capture.landing.lander_metrics import LanderMetrics
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.layout import CHANGELOG_SCHEMA
from tidelake.lake.watermarks import read_watermarks
from tidelake.tso import compose
from tidelake.wait import wait_until

CF = "cf-1"
MINUTE = 60  # bucket size (labels have minute resolution): a few minutes of commit ts give several buckets


def files_per_bucket(layout) -> Counter:
    actions = pa.table(DeltaTable(layout.changelog).get_add_actions(flatten=True))
    return Counter(zip(map(int, actions["partition.table_id"].to_pylist()), actions["partition.commit_bucket"].to_pylist()))


def landed(layout, version: int | None = None, columns=CHANGELOG_SCHEMA.names) -> Counter:
    """Every landed row (the given columns) as a multiset."""
    rows = DeltaTable(layout.changelog, version=version).to_pyarrow_table(columns=list(columns)).to_pylist()
    return Counter(tuple(r[c] for c in columns) for r in rows)


def as_landed(rows) -> Counter:
    """What the changelog must hold for `rows`, flush_seq aside (the lander's own numbering)."""
    return Counter((r.table_id, bucket_label(r.commit_ts, MINUTE), r.commit_ts, r.start_ts, r.op, r.key, r.value,
                    r.old_value, r.region_id) for r in rows)


def land(lander: Lander, rows) -> None:
    lander.add_rows(rows)
    lander.flush()


def test_only_closed_buckets_with_several_small_files_of_the_given_tables_qualify(layout, make_rows, base_ms):
    lander = Lander(layout, CF, flush_interval_s=3600, bucket_seconds=MINUTE, compact_interval_s=3600)
    try:
        for minute in range(3):
            for _ in range(2):
                land(lander, make_rows(1, 3, at_ms=base_ms + 60_000 * minute) + make_rows(2, 3, at_ms=base_ms + 60_000 * minute))
        land(lander, make_rows(1, 3, at_ms=base_ms + 180_000))  # a closed bucket of one file
        table = DeltaTable(layout.changelog)
        upto = compose(base_ms + 240_000, 0) - 1
        assert closed_buckets_to_compact(table, {1: upto}) == {1: [bucket_label(compose(base_ms + 60_000 * s, 0), MINUTE)
                                                                   for s in range(3)]}
        # table 2's watermark inside its second bucket: only the first is closed
        assert closed_buckets_to_compact(table, {2: compose(base_ms + 90_000, 0)}) == {
            2: [bucket_label(compose(base_ms, 0), MINUTE)]}
        assert closed_buckets_to_compact(table, {}) == {}
    finally:
        lander.close()


def test_compaction_keeps_every_row_and_concurrent_flushes_land(layout, make_rows, base_ms):
    metrics = LanderMetrics(CollectorRegistry())
    lander = Lander(layout, CF, flush_interval_s=3600, bucket_seconds=MINUTE, compact_interval_s=3600, metrics=metrics)
    try:
        added = []
        for minute in range(4):
            for _ in range(3):
                rows = make_rows(1, 5, at_ms=base_ms + 60_000 * minute) + make_rows(2, 5, at_ms=base_ms + 60_000 * minute)
                added += rows
                land(lander, rows)
        lander.resolve(1, compose(base_ms + 180_000, 0) - 1)  # buckets 0-2 of table 1 closed (the watermark is the last ts of bucket 2), bucket 3 open
        lander.resolve(2, compose(base_ms + 30_000, 0))  # table 2: none closed
        lander.flush()
        before = files_per_bucket(layout)
        before_version = DeltaTable(layout.changelog).version()

        stop = threading.Event()
        late = []

        def keep_flushing():  # the open buckets keep getting appends while the rewrite runs
            while not stop.is_set():
                rows = make_rows(1, 2, at_ms=base_ms + 180_000) + make_rows(2, 2, at_ms=base_ms + 60_000)
                late.extend(rows)
                land(lander, rows)

        flusher = threading.Thread(target=keep_flushing)
        flusher.start()
        try:
            compactor = BucketCompactor(layout, lambda: lander.durable_watermarks()[0], 3600)
            removed = compactor.compact_once()
        finally:
            stop.set()
            flusher.join()

        after = files_per_bucket(layout)
        closed = [(1, bucket_label(compose(base_ms + 60_000 * s, 0), MINUTE)) for s in range(3)]
        assert removed == sum(before[b] for b in closed) and removed == 9
        assert all(after[b] == 1 for b in closed)
        open_bucket = (1, bucket_label(compose(base_ms + 180_000, 0), MINUTE))
        assert after[open_bucket] >= before[open_bucket]  # appended to, never rewritten
        assert all(after[b] >= n for b, n in before.items() if b[0] == 2)
        assert landed(layout, columns=CHANGELOG_SCHEMA.names[:-1]) == as_landed(added + late)
        assert not landed(layout, before_version) - landed(layout)  # flush_seq of every row kept too
        assert read_watermarks(layout).table_resolved[1] == compose(base_ms + 180_000, 0) - 1
    finally:
        lander.close()


def test_the_landers_own_thread_compacts_closed_buckets_and_counts_the_files(layout, make_rows, base_ms):
    registry = CollectorRegistry()
    lander = Lander(layout, CF, flush_interval_s=3600, bucket_seconds=MINUTE, compact_interval_s=0.2,
                    metrics=LanderMetrics(registry))
    try:
        for _ in range(3):
            land(lander, make_rows(1, 4, at_ms=base_ms))
        lander.resolve(1, compose(base_ms + 60_000, 0) - 1)
        lander.flush()
        bucket = (1, bucket_label(compose(base_ms, 0), MINUTE))
        wait_until(lambda: files_per_bucket(layout)[bucket] == 1, 20, "the closed bucket compacted")
        wait_until(lambda: registry.get_sample_value("tidelake_lander_compacted_files_total", {"changefeed": CF}) == 3,
                   5, "the compacted files counted")
    finally:
        lander.close()


def test_a_flush_committed_after_the_compactor_read_the_log_does_not_fail_the_rewrite(layout, make_rows, base_ms):
    """The compactor's snapshot is older than the flush (another shard's or its own lander's):
    delta-rs must commit the rewrite after it, since the flush added files to another partition."""
    lander = Lander(layout, CF, flush_interval_s=3600, bucket_seconds=MINUTE, compact_interval_s=3600)
    try:
        for _ in range(3):
            land(lander, make_rows(1, 4, at_ms=base_ms) + make_rows(2, 4, at_ms=base_ms))
        stale = DeltaTable(layout.changelog)
        late = make_rows(1, 4, at_ms=base_ms + 60_000) + make_rows(2, 4, at_ms=base_ms)  # table 2's bucket stays open
        land(lander, late)
        assert compact_buckets(stale, 1, [bucket_label(compose(base_ms, 0), MINUTE)]) == 3
        assert files_per_bucket(layout)[(1, bucket_label(compose(base_ms, 0), MINUTE))] == 1
        assert files_per_bucket(layout)[(2, bucket_label(compose(base_ms, 0), MINUTE))] == 4
        assert sum(landed(layout).values()) == 3 * 8 + 8
    finally:
        lander.close()


def test_a_round_the_store_has_no_room_for_is_one_line_not_a_trace(layout, monkeypatch, caplog):
    """A full disk fails each round: one warning naming the cause, no trace per round (issue #32)."""
    rounds = []

    def full_disk(self):
        rounds.append(1)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(BucketCompactor, "compact_once", full_disk)
    compactor = BucketCompactor(layout, dict, 0.05)
    compactor.start()
    wait_until(lambda: len(rounds) >= 2, 10, "two rounds")
    compactor.stop()
    said = [r for r in caplog.records if r.name.endswith("bucket_compaction")]
    assert said and all(r.exc_info is None for r in said), said
    assert said[0].getMessage() == ("compacting closed changelog buckets waits: the lake's filesystem is full "
                                    "(OSError: [Errno 28] No space left on device); retrying in 0 s")
