"""Merge planning: how far one replica may advance in this run, and in which chunks.

upper = min(resolved ts over the table's physical ids, DDL resolved ts, next DDL ts - 1, cap)
(docs/design.md#timestamps-and-watermarks): a replica is correct as of ONE ts, so one lagging
partition holds it back. At a barrier the step is the DDL. Chunks are cut at commit-ts quantiles
of the file stats, each commits its own checkpoint. Owner: TableMerge and the Airflow plan.

More: docs/internals.md#table_plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tidelake.lake.layout import DdlSource
from tidelake.lake.watermarks import Watermarks

DEFAULT_CHUNK_ROWS = 2_000_000

BOUND_RESOLVED = "resolved"
BOUND_DDL_RESOLVED = "ddl_resolved"
BOUND_BARRIER = "barrier"
BOUND_CAP = "cap"


class PlanHistory(Protocol):
    """What planning needs from tidelake.lake.schema_history.SchemaHistory."""

    def physical_ids_at(self, table: Any, ts: int) -> list[int]: ...

    def next_ddl_after(self, table: Any, ts: int) -> Any: ...


@dataclass(frozen=True)
class FileStat:
    """One changelog file's row count and commit-ts range (from the Delta log's stats)."""

    num_records: int
    min_ts: int
    max_ts: int


@dataclass(frozen=True)
class TableMergePlan:
    """One step for one table: merge `chunks` up to `upper`, or apply `barrier_event`, or wait.

    `bound` names what limited `upper` (resolved, ddl_resolved, barrier, cap); `reason` says why
    the table cannot advance at all (e.g. a partition without a resolved ts yet).
    """

    table: Any
    lower: int | None  # None: no replica yet
    upper: int | None
    physical_ids: tuple[int, ...]
    bound: str
    barrier_event: Any = None
    chunks: tuple[tuple[int, int], ...] = ()
    reason: str | None = None

    @property
    def at_barrier(self) -> bool:
        return self.barrier_event is not None

    @property
    def idle(self) -> bool:
        """Nothing to do in this run: neither data to merge nor a DDL to apply."""
        return not self.chunks and not self.at_barrier


def window_upper(
    lower: int,
    physical_ids: Sequence[int],
    watermarks: Watermarks,
    next_ddl_ts: int | None,
    until_ts: int | None = None,
) -> tuple[int, str, str | None]:
    """(upper, the bound that set it, reason the table is blocked or None)."""
    if not physical_ids:
        return lower, BOUND_RESOLVED, "the table has no physical ids at its checkpoint"
    missing = [pid for pid in physical_ids if pid not in watermarks.table_resolved]
    if missing:
        return lower, BOUND_RESOLVED, f"no resolved ts yet for physical table(s) {missing}"
    if watermarks.ddl_resolved <= 0:
        return lower, BOUND_DDL_RESOLVED, "the DDL puller has not reported a resolved ts yet"
    candidates = [
        (min(watermarks.table_resolved[pid] for pid in physical_ids), BOUND_RESOLVED),
        (watermarks.ddl_resolved, BOUND_DDL_RESOLVED),
    ]
    if next_ddl_ts is not None:
        candidates.append((next_ddl_ts - 1, BOUND_BARRIER))
    if until_ts is not None:
        candidates.append((until_ts, BOUND_CAP))
    upper, bound = min(candidates, key=lambda c: c[0])
    return max(upper, lower), bound, None


def estimated_rows(stats: Sequence[FileStat], lo: int, hi: int) -> float:
    """Changes expected in (lo, hi], each file's rows spread evenly over its ts range."""
    return _cumulative(stats, hi) - _cumulative(stats, lo)


def _cumulative(stats: Sequence[FileStat], t: int) -> float:
    total = 0.0
    for s in stats:
        if t >= s.max_ts:
            total += s.num_records
        elif t >= s.min_ts:
            total += s.num_records * (t - s.min_ts + 1) / (s.max_ts - s.min_ts + 1)
    return total


def split_window(lo: int, hi: int, stats: Sequence[FileStat], max_rows: int) -> list[tuple[int, int]]:
    """(lo, hi] cut at estimated commit-ts quantiles into chunks of about `max_rows` changes."""
    if hi <= lo:
        return []
    total = estimated_rows(stats, lo, hi)
    pieces = max(1, math.ceil(total / max_rows)) if max_rows > 0 else 1
    if pieces == 1:
        return [(lo, hi)]
    knots = _knots(stats)
    base = _cumulative(stats, lo)
    cuts: list[int] = []
    for k in range(1, pieces):
        t = _first_ts_reaching(knots, base + total * k / pieces)
        if lo < t < hi and (not cuts or t > cuts[-1]):
            cuts.append(t)
    bounds = [lo, *cuts, hi]
    return list(zip(bounds[:-1], bounds[1:]))


def _knots(stats: Sequence[FileStat]) -> list[tuple[int, float, float]]:
    """(ts, cumulative rows at ts, slope after ts) of the piecewise-linear estimate."""
    deltas: dict[int, float] = {}
    for s in stats:
        if s.num_records <= 0:
            continue
        rate = s.num_records / (s.max_ts - s.min_ts + 1)
        deltas[s.min_ts - 1] = deltas.get(s.min_ts - 1, 0.0) + rate
        deltas[s.max_ts] = deltas.get(s.max_ts, 0.0) - rate
    out = []
    value = slope = 0.0
    prev = None
    for t in sorted(deltas):
        if prev is not None:
            value += slope * (t - prev)
        slope += deltas[t]
        out.append((t, value, slope))
        prev = t
    return out


def _first_ts_reaching(knots: list[tuple[int, float, float]], target: float) -> int:
    for i, (t, value, slope) in enumerate(knots):
        nxt = knots[i + 1] if i + 1 < len(knots) else None
        if nxt is not None and nxt[1] < target:
            continue
        if value >= target or slope <= 0:
            return t
        return t + math.ceil((target - value) / slope)
    return knots[-1][0] if knots else 0


def plan_table(
    table: Any,
    checkpoint: int | None,
    watermarks: Watermarks,
    history: PlanHistory,
    until_ts: int | None = None,
    stats: Sequence[FileStat] = (),
    max_rows: int = DEFAULT_CHUNK_ROWS,
    passes: Callable[[Any], bool] | None = None,
) -> TableMergePlan:
    """The next step for `table` from `checkpoint` (see the module docstring).

    Without a checkpoint (no replica yet) the step is the table's first DDL, its CREATE, which
    creates the replica. A table that entered the feed through the start snapshot instead
    waits for its bootstrap: an empty replica there would silently miss the existing rows.
    """
    if checkpoint is None:
        first = history.next_ddl_after(table, 0)
        if first is None:
            return TableMergePlan(table, None, None, (), BOUND_BARRIER, reason="the table has no DDL history")
        if getattr(first, "source", None) == DdlSource.SNAPSHOT:
            reason = f"no replica yet: bootstrap it from the snapshot at {first.commit_ts}"
            return TableMergePlan(table, None, None, (), BOUND_BARRIER, reason=reason)
        return TableMergePlan(table, None, None, (), BOUND_BARRIER, first)
    physical_ids = tuple(history.physical_ids_at(table, checkpoint))
    event = history.next_ddl_after(table, checkpoint)
    while event is not None and passes is not None and passes(event):
        event = history.next_ddl_after(table, event.commit_ts)
    next_ts = event.commit_ts if event is not None else None
    if next_ts is not None and checkpoint == next_ts - 1:
        # The DDL's last commit also writes the rows committed at exactly its ts (async commit and
        # 1PC can share it; docs/design.md#dml-at-a-ddls-commit-ts): they must have landed, so
        # every id the DDL keeps must be resolved to it. Ids it removes stop at ts - 1; ids it
        # creates hold no row at ts, except the rows a job rewrote (a re-partitioning's new ids, a
        # reorganising MODIFY COLUMN's table), which a shard lands at ts before it resolves the
        # new ids or reports the DDL resolved ts (tidelake.capture.changefeed.copied_rows).
        after = set(history.physical_ids_at(table, next_ts))
        if event.copied_physical_ids:
            ready = watermarks.reached(next_ts, after)
        else:
            ready = not watermarks.lagging(next_ts, set(physical_ids) & after)
        if not ready:
            return TableMergePlan(table, checkpoint, checkpoint, physical_ids, BOUND_RESOLVED)
        return TableMergePlan(table, checkpoint, checkpoint, physical_ids, BOUND_BARRIER, event)
    upper, bound, reason = window_upper(checkpoint, physical_ids, watermarks, next_ts, until_ts)
    chunks = tuple(split_window(checkpoint, upper, stats, max_rows)) if reason is None else ()
    return TableMergePlan(table, checkpoint, upper, physical_ids, bound, None, chunks, reason)
