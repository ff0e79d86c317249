"""Lander: durability order, crash points, retries, backpressure, shutdown, metrics."""

from __future__ import annotations

import errno
import logging
import threading
from dataclasses import replace

import pytest
from deltalake import DeltaTable
from prometheus_client import REGISTRY, CollectorRegistry

from tidelake.capture.landing.app_txn import LakeConflictError
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.capture.landing import lander as lander_module
from tidelake.capture.landing.lander import Lander, LanderClosedError
from tidelake.capture.landing.lander_metrics import LanderMetrics
from tidelake.capture.landing.resident_memory import ResidentGrowth
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.errors import InputError
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.row_change import memory_bytes
from tidelake.lake.watermarks import read_watermarks

CF = "cf-1"
APP = "tidelake-puller/" + CF


class Crash(Exception):
    """Stands for the process dying at an injected point."""


@pytest.fixture
def open_lander(layout):
    landers = []

    def open_(**kw) -> Lander:
        kw.setdefault("flush_interval_s", 3600)
        lander = Lander(layout, CF, **kw)
        landers.append(lander)
        return lander

    yield open_
    for lander in landers:
        lander._closed = True  # noqa: SLF001 - stop flusher threads of "crashed" landers too
        with lander._cond:  # noqa: SLF001
            lander._cond.notify_all()  # noqa: SLF001


def _changelog(layout, version=None) -> list[tuple[int, bytes]]:
    table = DeltaTable(layout.changelog, version=version).to_pyarrow_table()
    return sorted(zip(table["commit_ts"].to_pylist(), table["key"].to_pylist()))


def _ddl_row(job_id: int, ts: int, table_id: int = 41) -> DdlRow:
    return DdlRow(job_id, ts, job_id + 100, 3, "create table", 2, "shop", table_id, "orders",
                  "CREATE TABLE orders (id INT)", '{"id": %d}' % table_id, '{"id": 2}', "job")


def assert_watermarks_covered(layout, added_before_resolve):
    """Invariant 1/2: every row <= a durable watermark is in the changelog at the watermark's
    version and at every later version."""
    wm = read_watermarks(layout)
    for version in {wm.changelog_version, DeltaTable(layout.changelog).version()} - {-1}:
        landed = set(_changelog(layout, version))
        for table_id, ts in wm.table_resolved.items():
            due = {(r.commit_ts, r.key) for r in added_before_resolve if r.table_id == table_id
                   and r.commit_ts <= ts}
            assert due <= landed, f"table {table_id} watermark {ts} covers rows not landed"
    return wm


def test_flush_lands_rows_then_watermarks(layout, open_lander, make_rows):
    lander = open_lander()
    rows = make_rows(41, 5) + make_rows(42, 3)
    lander.add_rows(rows)
    lander.resolve(41, rows[4].commit_ts)
    lander.resolve(42, rows[6].commit_ts)  # one row of 42 is above its watermark
    lander.add_ddl([_ddl_row(7, rows[0].commit_ts)])
    lander.resolve_ddl(rows[1].commit_ts)
    assert read_watermarks(layout).changelog_version == -1  # nothing durable before flush
    lander.flush()
    assert _changelog(layout) == sorted((r.commit_ts, r.key) for r in rows)
    wm = assert_watermarks_covered(layout, rows)
    assert wm.table_resolved == {41: rows[4].commit_ts, 42: rows[6].commit_ts}
    assert wm.ddl_resolved == rows[1].commit_ts
    assert wm.changelog_version == DeltaTable(layout.changelog).version()
    assert wm.ddl_version == DeltaTable(layout.ddl).version()
    assert DeltaTable(layout.ddl).to_pyarrow_table()["job_id"].to_pylist() == [7]
    assert lander.durable_watermarks() == ({41: rows[4].commit_ts, 42: rows[6].commit_ts},
                                           rows[1].commit_ts)


def test_watermark_only_flush_does_not_touch_the_changelog(layout, open_lander, make_rows):
    lander = open_lander()
    lander.add_rows(make_rows(41, 2))
    lander.flush()
    version = DeltaTable(layout.changelog).version()
    lander.resolve(41, 1 << 60)
    lander.flush()
    assert DeltaTable(layout.changelog).version() == version
    assert read_watermarks(layout).table_resolved == {41: 1 << 60}
    lander.flush()  # nothing new: no commit anywhere
    assert DeltaTable(layout.watermarks).version() == 1


def test_watermarks_never_move_back(layout, open_lander, make_rows):
    lander = open_lander()
    lander.resolve(41, 500)
    lander.flush()
    lander.resolve(41, 300)
    lander.flush()
    assert read_watermarks(layout).table_resolved == {41: 500}
    restarted = open_lander()
    restarted.resolve(41, 400)
    restarted.resolve(43, 10)
    restarted.flush()
    assert read_watermarks(layout).table_resolved == {41: 500, 43: 10}


# Where the process dies: the step that raises, whether that step's commit lands before the
# error (a lost ack), and whether the events commit had landed by then.
CRASH_POINTS = {
    "before_changelog_commit": (ChangelogWriter, "append", False, False),
    "changelog_commit_lost_ack": (ChangelogWriter, "append", True, True),
    "after_changelog_before_ddl": (DdlWriter, "insert", False, True),
    "after_ddl_before_watermarks": (WatermarkWriter, "write", False, True),
    "watermarks_commit_lost_ack": (WatermarkWriter, "write", True, True),
}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_each_step_keeps_invariants_and_retry_lands_once(
    point, layout, open_lander, make_rows, monkeypatch
):
    cls, method, commit_then_fail, events_landed = CRASH_POINTS[point]
    lander = open_lander()
    first = make_rows(41, 3)
    lander.add_rows(first)
    lander.resolve(41, first[-1].commit_ts)
    lander.flush()
    durable_before = read_watermarks(layout)

    second = make_rows(41, 4)
    lander.add_rows(second)
    lander.add_ddl([_ddl_row(9, second[0].commit_ts)])
    lander.resolve(41, second[-1].commit_ts)
    lander.resolve_ddl(second[-1].commit_ts)
    real = getattr(cls, method)

    def crash(*args, **kwargs):
        if commit_then_fail:
            real(*args, **kwargs)
        raise Crash(point)

    monkeypatch.setattr(cls, method, crash)
    with pytest.raises(Crash):
        lander.flush()
    monkeypatch.setattr(cls, method, real)

    # The state a restarted puller finds: the old watermark, never one covering lost rows.
    wm = assert_watermarks_covered(layout, first + second)
    watermarks_landed = point == "watermarks_commit_lost_ack"
    assert (wm == durable_before) != watermarks_landed
    landed_after_crash = _changelog(layout)
    assert len(landed_after_crash) == (7 if events_landed else 3)

    # A new lander on the same lake starts from what is durable and past every used sequence.
    restarted = open_lander()
    assert restarted.durable_watermarks() == (wm.table_resolved, wm.ddl_resolved)
    if events_landed:
        assert not ChangelogWriter(layout, APP).append(second, seq=2)  # same batch: no-op
        assert _changelog(layout) == landed_after_crash

    # The crashed lander retries the same batch with the same sequence: lands exactly once.
    lander.flush()
    assert _changelog(layout) == sorted((r.commit_ts, r.key) for r in first + second)
    wm = assert_watermarks_covered(layout, first + second)
    assert wm.table_resolved == {41: second[-1].commit_ts}
    assert DeltaTable(layout.ddl).to_pyarrow_table()["job_id"].to_pylist() == [9]


def test_second_puller_on_the_same_changefeed_is_refused(layout, open_lander, make_rows):
    old = open_lander()
    new = open_lander()
    old.add_rows(make_rows(41, 1))
    old.flush()  # takes sequence 1, which `new` also planned to use
    new.add_rows(make_rows(41, 1))
    with pytest.raises(LakeConflictError, match="another puller"):
        new.flush()
    assert len(_changelog(layout)) == 1


def test_a_second_puller_refused_in_the_background_says_so_in_one_line(layout, open_lander, make_rows, caplog):
    """The flush thread's refusal is logged once, as its message: no traceback (an operator who
    started a second puller by hand reads one line, then the CLI's)."""
    old = open_lander()
    new = open_lander(flush_interval_s=0.05)
    old.add_rows(make_rows(41, 1))
    old.flush()
    with caplog.at_level(logging.INFO, logger="tidelake.capture.landing.lander"):
        new.add_rows(make_rows(41, 1))
        assert _eventually(lambda: any(r.levelno >= logging.ERROR for r in caplog.records))
    (refusal,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "another puller is landing this changefeed" in refusal.getMessage()
    assert refusal.exc_info is None
    with pytest.raises(LakeConflictError, match="another puller"):
        new.add_rows(make_rows(41, 1))


def test_a_full_lake_pauses_landing_in_one_line_and_it_resumes_when_room_returns(layout, open_lander, make_rows,
                                                                                 caplog, monkeypatch):
    """While the store has no room the same flush is retried and said once (not a trace per try);
    once it has room the rows land exactly once and the lander says it resumed."""
    monkeypatch.setattr(lander_module, "PAUSED_RETRY_S", 0.1)
    real_append, tries = ChangelogWriter.append, []

    def full_disk(self, rows, seq, writer):
        tries.append(seq)
        if len(tries) <= 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_append(self, rows, seq, writer)

    monkeypatch.setattr(ChangelogWriter, "append", full_disk)
    rows = make_rows(41, 3)
    with caplog.at_level(logging.INFO, logger="tidelake.capture.landing.lander"):
        lander = open_lander(flush_interval_s=0.05)
        lander.add_rows(rows)
        assert _eventually(lambda: lander.paused() == "the lake's filesystem is full")
        assert _eventually(lambda: lander.paused() is None)
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    paused, resumed = (r.getMessage() for r in said)
    assert paused.startswith(f"landing of {lander.app_id} paused 0 s: the lake's filesystem is full; ")
    assert paused.endswith("(OSError: [Errno 28] No space left on device)")
    assert resumed.startswith(f"landing of {lander.app_id} resumed after ")
    assert resumed.endswith(" s paused (the lake's filesystem is full)")
    assert all(r.exc_info is None for r in said)
    assert len(tries) > 5 and len(set(tries)) == 1  # one flush, retried under its sequence
    assert _changelog(layout) == sorted((r.commit_ts, r.key) for r in rows)


def test_backpressure_blocks_when_quota_is_full_and_releases_after_flush(
    layout, open_lander, make_rows, monkeypatch
):
    batch_a, batch_b = make_rows(41, 3), make_rows(41, 3)
    quota_rows = make_rows(41, 8)
    quota = memory_bytes(quota_rows + batch_a)  # these two fill the quota exactly
    lander = open_lander(memory_quota_bytes=quota, flush_bytes=quota)
    gate = threading.Event()
    real_append = ChangelogWriter.append

    def slow_append(self, rows, seq, writer):
        gate.wait(10)
        return real_append(self, rows, seq, writer)

    monkeypatch.setattr(ChangelogWriter, "append", slow_append)
    lander.add_rows(quota_rows)
    assert lander.buffered_bytes() == memory_bytes(quota_rows)  # the quota counts memory, not payload
    lander.add_rows(batch_a)
    producer = threading.Thread(target=lander.add_rows, args=(quota_rows + batch_b,))
    producer.start()
    producer.join(0.5)
    assert producer.is_alive(), "add_rows must block while the quota is full"
    assert len(_changelog(layout)) == 0
    gate.set()  # storage catches up: the flusher lands the buffer and frees the quota
    producer.join(10)
    assert not producer.is_alive()
    lander.flush()
    assert len(_changelog(layout)) == 8 + 3 + 8 + 3


def test_one_call_larger_than_the_quota_waits_at_the_quota_piece_by_piece(layout, open_lander, make_rows, monkeypatch):
    """The feed hands over up to a thousand rows per call: a call is admitted in pieces, so what
    is held stays within the quota while storage is slow, as it did with a call per event."""
    rows = make_rows(41, 40)
    quota = memory_bytes(rows[:8])
    lander = open_lander(memory_quota_bytes=quota, flush_bytes=quota)
    gate = threading.Event()
    real_append = ChangelogWriter.append

    def slow_append(self, batch, seq, writer):
        gate.wait(10)
        return real_append(self, batch, seq, writer)

    monkeypatch.setattr(ChangelogWriter, "append", slow_append)
    producer = threading.Thread(target=lander.add_rows, args=(rows,))  # five times the quota, one call
    producer.start()
    producer.join(0.5)
    assert producer.is_alive(), "add_rows must wait at the quota"
    assert 0 < lander.buffered_bytes() <= quota
    gate.set()
    producer.join(10)
    assert not producer.is_alive()
    lander.flush()
    assert _changelog(layout) == sorted((r.commit_ts, r.key) for r in rows)


def test_flusher_thread_flushes_by_size(layout, open_lander, make_rows):
    lander = open_lander(memory_quota_bytes=10_000, flush_bytes=100)
    lander.add_rows(make_rows(41, 5))  # > 100 bytes: wakes the flusher
    for _ in range(100):
        if DeltaTable(layout.changelog).version() > 0:
            break
        threading.Event().wait(0.05)
    assert len(_changelog(layout)) == 5


def test_close_flushes_and_refuses_more_rows(layout, open_lander, make_rows):
    lander = open_lander()
    rows = make_rows(41, 2)
    lander.add_rows(rows)
    lander.resolve(41, rows[-1].commit_ts)
    lander.close()
    assert len(_changelog(layout)) == 2
    assert read_watermarks(layout).table_resolved == {41: rows[-1].commit_ts}
    with pytest.raises(LanderClosedError):
        lander.add_rows(make_rows(41, 1))


def test_metrics_and_progress_count_rows_and_bytes(open_lander, make_rows):
    def sample(name):
        return REGISTRY.get_sample_value(name, {"changefeed": CF}) or 0

    rows0, bytes0, flushes0 = (sample("tidelake_lander_rows_total"),
                               sample("tidelake_lander_bytes_total"),
                               sample("tidelake_lander_flushes_total"))
    lander = open_lander()
    rows = make_rows(41, 4)
    lander.add_rows(rows)
    payload = sum(len(r.key) + len(r.value) + len(r.old_value) for r in rows)
    assert lander.payload_bytes_added() == payload  # what progress lines report, before it lands
    lander.flush()
    assert sample("tidelake_lander_rows_total") - rows0 == 4
    assert sample("tidelake_lander_bytes_total") - bytes0 == payload
    assert sample("tidelake_lander_flushes_total") - flushes0 == 1
    assert sample("tidelake_lander_flush_seconds_count") >= 1


def test_per_table_metrics_stay_exact_for_calls_of_one_or_many_tables(open_lander, make_rows):
    """The per-table rows and bytes are counted per call as rows are added, carried with their
    flush and exported once it lands: exact across flushes and for calls mixing tables."""
    registry = CollectorRegistry()
    lander = open_lander(metrics=LanderMetrics(registry))

    def sample(name, table_id=None):
        labels = {"changefeed": CF} if table_id is None else {"changefeed": CF, "table_id": str(table_id)}
        return registry.get_sample_value(name, labels) or 0

    def sized(rows, width):
        return [replace(r, value=b"v" * (width + i), old_value=b"o" * (i % 3)) for i, r in enumerate(rows)]

    mixed = sized(make_rows(41, 3), 10) + sized(make_rows(42, 2), 50) + sized(make_rows(41, 1), 7)
    first = [mixed, sized(make_rows(43, 4), 100), sized(make_rows(41, 2), 1)]
    second = [sized(make_rows(42, 5), 20)]
    for call in first:
        lander.add_rows(call)
    assert sample("tidelake_lander_table_rows_total", 41) == 0  # counted once landed
    lander.flush()
    for call in second:
        lander.add_rows(call)
    lander.flush()
    landed = [r for call in first + second for r in call]
    for table_id in (41, 42, 43):
        mine = [r for r in landed if r.table_id == table_id]
        assert sample("tidelake_lander_table_rows_total", table_id) == len(mine)
        assert sample("tidelake_lander_table_bytes_total", table_id) == sum(
            len(r.key) + len(r.value) + len(r.old_value) for r in mine)
    payload = sum(len(r.key) + len(r.value) + len(r.old_value) for r in landed)
    assert sample("tidelake_lander_rows_total") == len(landed) == 17
    assert sample("tidelake_lander_bytes_total") == payload == lander.payload_bytes_added()
    assert sample("tidelake_lander_buffered_bytes") == 0


def test_a_bad_op_anywhere_in_a_call_is_rejected_before_buffering(open_lander, make_rows):
    lander = open_lander()
    with pytest.raises(InputError, match="table 42 has op 'lock'"):
        lander.add_rows(make_rows(41, 2) + make_rows(42, 1, op="lock") + make_rows(41, 1))
    assert lander.buffered_bytes() == 0 and lander.payload_bytes_added() == 0
    rows = make_rows(41, 2)
    lander.add_rows(rows)
    assert lander.buffered_bytes() == memory_bytes(rows)


@pytest.mark.parametrize("cf", ["", "a/b", "cf 1", "x'; drop"])
def test_changefeed_id_is_validated(layout, cf):
    with pytest.raises(InputError):
        Lander(layout, cf)


def test_bad_op_is_rejected_before_buffering(open_lander, make_rows):
    lander = open_lander()
    with pytest.raises(InputError):
        lander.add_rows(make_rows(41, 1, op="lock"))


def _eventually(predicate, seconds: float = 10.0) -> bool:
    deadline = threading.Event()
    for _ in range(int(seconds / 0.05)):
        if predicate():
            return True
        deadline.wait(0.05)
    return predicate()


def test_flusher_thread_flushes_by_time(layout, open_lander):
    lander = open_lander(flush_interval_s=0.1)
    lander.resolve(41, 123)
    assert _eventually(lambda: read_watermarks(layout).table_resolved == {41: 123})


def test_background_flush_failure_is_retried_once_landed(layout, open_lander, make_rows,
                                                         monkeypatch):
    real_append = ChangelogWriter.append
    failures = []

    def flaky_append(self, rows, seq, writer):
        if not failures:
            failures.append(seq)
            raise OSError("object store timed out")
        return real_append(self, rows, seq, writer)

    monkeypatch.setattr(ChangelogWriter, "append", flaky_append)
    lander = open_lander(flush_interval_s=0.05)
    rows = make_rows(41, 3)
    lander.add_rows(rows)
    lander.resolve(41, rows[-1].commit_ts)
    assert _eventually(lambda: read_watermarks(layout).table_resolved == {41: rows[-1].commit_ts})
    assert failures == [1]
    assert len(_changelog(layout)) == 3


def test_flush_reentered_while_flushing_lands_everything(layout, open_lander, make_rows,
                                                         monkeypatch):
    """A nested flush (e.g. a shutdown hook running on the flushing thread) neither deadlocks
    nor loses what was added meanwhile: the outer flush runs once more."""
    lander = open_lander()
    late = make_rows(42, 2)
    real_append = ChangelogWriter.append

    def append_then_reenter(self, rows, seq, writer):
        landed = real_append(self, rows, seq, writer)
        if seq == 1:
            lander.add_rows(late)
            lander.flush()
        return landed

    monkeypatch.setattr(ChangelogWriter, "append", append_then_reenter)
    lander.add_rows(make_rows(41, 2))
    lander.flush()
    assert len(_changelog(layout)) == 4


def test_retry_that_finds_another_pullers_commit_stops_the_lander(layout, open_lander, make_rows,
                                                                  monkeypatch):
    """Old puller's flush fails before committing; a new puller takes the same sequence; the
    old one's retry must not mistake that commit for its own lost ack."""
    old, new = open_lander(), open_lander()
    real_append = ChangelogWriter.append
    calls = []

    def fail_first(self, rows, seq, writer):
        calls.append(seq)
        if len(calls) == 1:
            raise OSError("connection reset")
        return real_append(self, rows, seq, writer)

    monkeypatch.setattr(ChangelogWriter, "append", fail_first)
    lost = make_rows(41, 2)
    old.add_rows(lost)
    old.resolve(41, lost[-1].commit_ts)
    with pytest.raises(OSError):
        old.flush()
    new.add_rows(make_rows(41, 1))
    new.flush()
    with pytest.raises(LakeConflictError, match="not by this lander"):
        old.flush()
    with pytest.raises(LakeConflictError):
        old.add_rows(make_rows(41, 1))
    assert not {(r.commit_ts, r.key) for r in lost} & set(_changelog(layout))
    assert read_watermarks(layout).table_resolved == {}


class _Rss:
    """A settable RSS reading for ResidentGrowth: the process 'grows' when a test says so."""

    def __init__(self) -> None:
        self.now = 1000

    def read(self) -> int:
        return self.now


def _flush_sizes(layout, rows) -> list[int]:
    """memory_bytes of each landed flush, in flush order, from the changelog itself."""
    by_key = {(r.commit_ts, r.key): r for r in rows}
    table = DeltaTable(layout.changelog).to_pyarrow_table()
    flushes: dict[int, list] = {}
    for seq, ts, key in zip(table["flush_seq"].to_pylist(), table["commit_ts"].to_pylist(),
                            table["key"].to_pylist()):
        flushes.setdefault(seq, []).append(by_key[(ts, key)])
    return [memory_bytes(flushes[seq]) for seq in sorted(flushes)]


def test_rss_backpressure_never_stalls_and_every_flush_carries_the_floor(layout, open_lander, make_rows):
    """The process stays over its quota all along (as when its fixed native memory alone exceeds
    it): rows still land, in flushes of at least the floor each, not one row at a time."""
    rss = _Rss()
    batches = [make_rows(41, 4) for _ in range(60)]
    rows = [r for b in batches for r in b]
    floor = memory_bytes(rows) // 6
    lander = open_lander(memory_quota_bytes=10 * memory_bytes(rows), flush_bytes=10 * memory_bytes(rows),
                         resident=ResidentGrowth(rss.read), floor_bytes=floor)
    lander.resolve(41, 1)  # the feed is up: the base is taken here
    rss.now += 100 * memory_bytes(rows)  # far over the quota, and never coming back

    def produce():
        for batch in batches:
            lander.add_rows(batch)

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(60)
    assert not producer.is_alive(), "add_rows must never block for good"
    lander.flush()
    assert len(_changelog(layout)) == len(rows)
    sizes = _flush_sizes(layout, rows)
    assert len(sizes) >= 3, sizes  # without the RSS check the quota would have taken them all in one
    assert all(size >= floor for size in sizes[:-1]), (floor, sizes)


def test_rows_under_the_floor_are_taken_even_when_the_process_is_over(layout, open_lander, make_rows):
    rss = _Rss()
    rows = make_rows(41, 20)
    lander = open_lander(memory_quota_bytes=10 * memory_bytes(rows), resident=ResidentGrowth(rss.read),
                         floor_bytes=memory_bytes(rows))
    lander.resolve(41, 1)
    rss.now += 100 * memory_bytes(rows)
    for row in rows[:-1]:  # together just under the floor: none of these waits for a flush
        lander.add_rows([row])
    assert lander.buffered_bytes() == memory_bytes(rows[:-1])
    assert _changelog(layout) == []  # nothing was flushed to make room


def test_without_rss_growth_only_the_quota_applies(layout, open_lander, make_rows):
    rss = _Rss()
    rows = make_rows(41, 40)
    lander = open_lander(memory_quota_bytes=memory_bytes(rows), flush_bytes=memory_bytes(rows),
                         resident=ResidentGrowth(rss.read), floor_bytes=1)
    lander.resolve(41, 1)
    rss.now += memory_bytes(rows) // 2  # grown, but by less than the quota
    for row in rows:
        lander.add_rows([row])  # none blocks: the quota holds them all
    lander.flush()
    assert _flush_sizes(layout, rows) == [memory_bytes(rows)]


def test_the_flush_loop_gives_freed_memory_back_after_its_flushes_in_a_watched_process(layout, open_lander,
                                                                                     make_rows):
    trimmed_after_landing = threading.Event()

    def trim():
        if len(_changelog(layout)) == 3:
            trimmed_after_landing.set()

    lander = open_lander(flush_interval_s=0.05, resident=ResidentGrowth(_Rss().read, trim=trim))
    lander.add_rows(make_rows(41, 3))
    lander.resolve(41, 1)
    assert trimmed_after_landing.wait(60), "no flush of the loop gave memory back once the rows landed"
