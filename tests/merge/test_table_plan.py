"""Merge planning without Spark: bounds, barriers, blocked tables, chunking against real row counts."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from tidelake.lake.watermarks import Watermarks
from tidelake.merge.table_plan import (
    BOUND_BARRIER,
    BOUND_CAP,
    BOUND_DDL_RESOLVED,
    BOUND_RESOLVED,
    FileStat,
    estimated_rows,
    plan_table,
    split_window,
    window_upper,
)


@dataclass(frozen=True)
class Event:
    commit_ts: int
    copied_physical_ids: tuple[int, ...] = ()


class History:
    """Physical ids change at each DDL ts (as TRUNCATE does); DDLs at the given ts, each with the
    ids whose rewritten rows the puller lands at its ts (`copied`)."""

    def __init__(self, ddl_ts: list[int], ids_by_epoch: list[list[int]], copied: tuple[int, ...] = ()) -> None:
        self.ddl_ts = ddl_ts
        self.ids = ids_by_epoch
        self.copied = copied

    def physical_ids_at(self, table, ts):
        return self.ids[sum(1 for d in self.ddl_ts if d <= ts)]

    def next_ddl_after(self, table, ts):
        return next((Event(d, self.copied) for d in self.ddl_ts if d > ts), None)


def marks(resolved: dict[int, int], ddl: int = 10_000) -> Watermarks:
    return Watermarks(resolved, ddl, 1)


def test_upper_is_the_minimum_over_partitions_and_each_bound_is_named():
    wm = marks({1: 500, 2: 300, 3: 900}, ddl=800)
    assert window_upper(100, [1, 2, 3], wm, None) == (300, BOUND_RESOLVED, None)
    assert window_upper(100, [1, 3], wm, None) == (500, BOUND_RESOLVED, None)
    assert window_upper(100, [3], wm, None) == (800, BOUND_DDL_RESOLVED, None)
    assert window_upper(100, [3], wm, 401) == (400, BOUND_BARRIER, None)
    assert window_upper(100, [3], wm, 401, until_ts=250) == (250, BOUND_CAP, None)
    # a watermark behind the checkpoint (a restarted puller) never moves the replica back
    assert window_upper(600, [2], wm, None) == (600, BOUND_RESOLVED, None)


def test_blocked_tables_name_what_is_missing():
    upper, _, reason = window_upper(100, [1, 7], marks({1: 500}), None)
    assert upper == 100 and "7" in reason
    upper, bound, reason = window_upper(100, [1], marks({1: 500}, ddl=0), None)
    assert (upper, bound) == (100, BOUND_DDL_RESOLVED) and "DDL" in reason
    plan = plan_table("t", 100, marks({1: 500}), History([], [[1, 7]]))
    assert plan.idle and plan.reason and plan.upper == plan.lower == 100


def test_barriers_cut_windows_and_the_ddl_is_the_next_step():
    history = History([301, 501], [[1], [2], [3]])  # TRUNCATE-like: new physical id per DDL
    wm = marks({1: 1000, 2: 1000, 3: 1000})
    steps = []
    checkpoint = 100
    while True:
        plan = plan_table("t", checkpoint, wm, history)
        if plan.idle:
            break
        if plan.at_barrier:
            steps.append(("ddl", plan.barrier_event.commit_ts))
            checkpoint = plan.barrier_event.commit_ts
        else:
            steps.append(("merge", plan.physical_ids, plan.chunks))
            checkpoint = plan.upper
    assert steps == [
        ("merge", (1,), ((100, 300),)),
        ("ddl", 301),
        ("merge", (2,), ((301, 500),)),
        ("ddl", 501),
        ("merge", (3,), ((501, 1000),)),
    ]


def test_a_known_ddl_beyond_the_ddl_resolved_ts_is_not_a_barrier_yet():
    plan = plan_table("t", 100, marks({1: 1000}, ddl=200), History([601], [[1], [1]]))
    assert (plan.upper, plan.bound, plan.chunks) == (200, BOUND_DDL_RESOLVED, ((100, 200),))


def _files(ts: list[int], per_file: int) -> list[FileStat]:
    ts = sorted(ts)
    return [FileStat(len(c), c[0], c[-1]) for c in (ts[i : i + per_file] for i in range(0, len(ts), per_file))]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chunks_partition_the_window_and_hold_about_max_rows(seed):
    rng = random.Random(seed)
    # bursty commit ts: dense bursts and sparse stretches, as real workloads land
    ts = [rng.randint(0, 10_000) for _ in range(3000)] + [rng.randint(4000, 4100) for _ in range(3000)]
    stats = _files(rng.sample(ts, len(ts)), 250)  # files overlap in ts, as flushes of many tables do
    lo, hi = 1000, 9000
    chunks = split_window(lo, hi, stats, max_rows=800)
    assert chunks[0][0] == lo and chunks[-1][1] == hi
    assert all(a < b for a, b in chunks) and all(x[1] == y[0] for x, y in zip(chunks, chunks[1:]))
    actual = [sum(1 for t in ts if a < t <= b) for a, b in chunks]
    in_window = sum(1 for t in ts if lo < t <= hi)
    assert sum(actual) == in_window
    assert len(chunks) >= in_window // 800
    assert max(actual) <= 800 * 3  # an estimate from overlapping files, not exact


def test_sorted_files_split_close_to_the_true_quantiles():
    ts = list(range(1, 10_001))
    stats = _files(ts, 100)
    chunks = split_window(0, 10_000, stats, max_rows=1000)
    actual = [sum(1 for t in ts if a < t <= b) for a, b in chunks]
    assert len(chunks) == 10 and all(abs(n - 1000) <= 100 for n in actual)
    assert estimated_rows(stats, 0, 10_000) == pytest.approx(10_000)


def test_a_window_without_stats_or_under_the_limit_is_one_chunk():
    assert split_window(5, 50, [], 10) == [(5, 50)]
    assert split_window(5, 50, [FileStat(3, 10, 20)], 10) == [(5, 50)]
    assert split_window(50, 50, [FileStat(3, 10, 20)], 10) == []


@dataclass(frozen=True)
class SourcedEvent:
    commit_ts: int
    source: str


class FirstEventHistory(History):
    def __init__(self, first: SourcedEvent) -> None:
        super().__init__([first.commit_ts], [[], [1]])
        self.first = first

    def next_ddl_after(self, table, ts):
        return self.first if self.first.commit_ts > ts else None


def test_without_a_replica_the_create_is_the_step_but_a_snapshot_table_waits_for_bootstrap():
    plan = plan_table("t", None, marks({1: 900}), FirstEventHistory(SourcedEvent(300, "job")))
    assert plan.at_barrier and plan.barrier_event.commit_ts == 300 and plan.lower is None
    plan = plan_table("t", None, marks({1: 900}), FirstEventHistory(SourcedEvent(300, "snapshot")))
    assert plan.idle and "bootstrap" in plan.reason
    plan = plan_table("t", 300, marks({1: 900}), FirstEventHistory(SourcedEvent(300, "job")))
    assert plan.chunks == ((300, 900),)


def test_a_barrier_waits_until_the_ids_the_ddl_keeps_are_resolved_to_its_ts():
    """The DDL's commit also writes the rows at its ts, so they must have landed: a kept id resolved
    only to ts - 1 makes the table wait; an id the DDL removes (it stops at ts - 1) does not."""
    kept = History([400], [[1, 2], [1, 3]])  # id 2 leaves at 400, id 3 joins there, id 1 stays
    waiting = plan_table("t", 399, marks({1: 399, 2: 399}), kept)
    assert waiting.idle and waiting.reason is None and waiting.upper == 399
    ready = plan_table("t", 399, marks({1: 400, 2: 399}), kept)
    assert ready.at_barrier and ready.barrier_event.commit_ts == 400
    replaced = History([400], [[1], [2]])  # TRUNCATE: no id kept, nothing at 400 to wait for
    assert plan_table("t", 399, marks({1: 399}), replaced).at_barrier


def test_a_repartitioning_barrier_waits_for_the_rows_copied_into_its_new_ids():
    """REORGANIZE PARTITION / PARTITION BY: the puller lands the copied rows of the new ids at the
    DDL's ts before it resolves them, so the barrier waits for every id after the DDL."""
    reorganized = History([400], [[1, 2], [1, 3, 4]], copied=(3, 4))  # 2 split into 3 and 4, 1 stays
    waiting = plan_table("t", 399, marks({1: 400, 2: 399, 3: 400}), reorganized)
    assert waiting.idle and waiting.reason is None and waiting.upper == 399
    ready = plan_table("t", 399, marks({1: 400, 2: 399, 3: 400, 4: 400}), reorganized)
    assert ready.at_barrier and ready.barrier_event.commit_ts == 400


def test_a_reorganising_modify_column_barrier_waits_for_the_ddl_watermark():
    """A MODIFY COLUMN that rewrote every row keeps its ids, already fed and possibly resolved past
    the DDL before a shard lands the copies: only a DDL watermark at the DDL's ts (each shard
    reports it after landing them) says they are in."""
    modified = History([400], [[1, 2], [1, 2]], copied=(1, 2))
    waiting = plan_table("t", 399, marks({1: 500, 2: 500}, ddl=399), modified)
    assert waiting.idle and waiting.reason is None and waiting.upper == 399
    ready = plan_table("t", 399, marks({1: 500, 2: 500}, ddl=400), modified)
    assert ready.at_barrier and ready.barrier_event.commit_ts == 400
    plain = History([400], [[1, 2], [1, 2]])  # no copies: the kept ids' watermarks are enough
    assert plan_table("t", 399, marks({1: 500, 2: 500}, ddl=399), plain).at_barrier
