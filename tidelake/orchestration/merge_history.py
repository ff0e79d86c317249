"""Recent merge history from the merge log, for the Replication page's charts.

Each merge-log row says when a run finished, which checkpoint it left a table at and how many
changes it applied. From those the page draws two pictures an operator looks at first:
- lag over time per table: the lag a reader saw right after each merge, finished_at minus the
  time of checkpoint_after (rows without a checkpoint, e.g. errors, are no points);
- apply throughput per run: changes applied over the run's wall time (first start to last finish
  of its tables), so a run of many small tables is not counted as the sum of their durations.
The merge log is read once for both, only its last merge_log.RECENT before the newest entry (the
page says so). Owner: the Airflow plugin's Replication page; the merge run writes the log.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.merge.merge_log import RECENT, recent_entries

DEFAULT_POINTS = 48
DEFAULT_RUNS = 48


@dataclass(frozen=True)
class LagPoint:
    """The lag of one table right after one of its merges."""

    at: datetime
    lag_s: float

    def to_json(self) -> dict[str, object]:
        """The page report's form (`lag_history` items)."""
        return {"at": self.at.isoformat(), "lag_s": self.lag_s}


@dataclass(frozen=True)
class RunThroughput:
    """One merge run over all its tables."""

    run_id: str
    started_at: datetime
    finished_at: datetime
    tables: int
    changes: int

    @property
    def seconds(self) -> float:
        return max((self.finished_at - self.started_at).total_seconds(), 1e-3)

    @property
    def changes_per_s(self) -> float:
        return self.changes / self.seconds

    def to_json(self) -> dict[str, object]:
        """The page report's form (`apply_runs` items)."""
        return {"run_id": self.run_id, "finished_at": self.finished_at.isoformat(), "tables": self.tables,
                "changes": self.changes, "seconds": self.seconds, "changes_per_s": self.changes_per_s}


@dataclass(frozen=True)
class MergeHistory:
    """What the page draws from the merge log. Each table's lag points stay in Arrow (`points`:
    table_key, finished_at, lag_s; by table, oldest first): every table's sparkline needs only its
    lags (`recent_lags`), and only the few charted tables need their points as objects (`lag`)."""

    points: pa.Table
    runs: list[RunThroughput]
    newest: datetime | None = None  # the newest entry's finish; what is shown starts RECENT before

    def recent_lags(self) -> dict[int, list[float]]:
        """Per table key the lags of its points, oldest first."""
        keys = pc.run_end_encode(self.points.column("table_key").combine_chunks())
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), keys.run_ends.cast(pa.int32())])
        lags = pa.ListArray.from_arrays(offsets, self.points.column("lag_s").combine_chunks())
        return dict(zip(keys.values.to_pylist(), lags.to_pylist()))

    def lag(self, keys: Iterable[int] | None = None) -> dict[int, list[LagPoint]]:
        """Per table key (of `keys`, default all) its points, oldest first."""
        points = self.points
        if keys is not None:
            points = points.filter(pc.is_in(points.column("table_key"), pa.array(sorted(set(keys)), pa.int64())))
        lag: dict[int, list[LagPoint]] = defaultdict(list)
        for key, at, seconds in zip(*(points.column(c).to_pylist() for c in ("table_key", "finished_at", "lag_s"))):
            lag[key].append(LagPoint(at, seconds))
        return dict(lag)

    def window_json(self) -> dict[str, object] | None:
        """The page report's `history_window`: which stretch of the merge log the charts cover."""
        if self.newest is None:
            return None
        return {"since": (self.newest - RECENT).isoformat(), "until": self.newest.isoformat(),
                "hours": RECENT.total_seconds() / 3600}


def merge_history(layout: LakeLayout, points: int = DEFAULT_POINTS, runs: int = DEFAULT_RUNS) -> MergeHistory:
    """Per table key its last `points` lag points, and the last `runs` runs, oldest first, within
    RECENT. That still holds a row per table per run (48,000 at the default 5-minute schedule over
    1,000 tables): it is grouped, sorted and cut in Arrow, and no per-row Python object is made."""
    log, newest = recent_entries(layout, ["run_id", "table_key", "checkpoint_after", "rows_in", "started_at",
                                          "finished_at"])
    if newest is None:
        return MergeHistory(_EMPTY_POINTS, [])
    return MergeHistory(_lag_points(log, points), _last_runs(log, runs), newest)


_EMPTY_POINTS = pa.table({"table_key": pa.array([], pa.int64()),
                          "finished_at": pa.array([], pa.timestamp("us", tz="UTC")),
                          "lag_s": pa.array([], pa.float64())})


def _lag_points(log: pa.Table, points: int) -> pa.Table:
    merged = log.filter(pc.is_valid(log.column("checkpoint_after")))
    if merged.num_rows == 0:
        return _EMPTY_POINTS
    merged = merged.take(pc.sort_indices(merged, [("table_key", "ascending"), ("finished_at", "ascending")]))
    # A row is kept when fewer than `points` rows of its table follow it: its 1-based position
    # is above its table's run end (exclusive) minus `points`.
    ends = pc.run_end_encode(merged.column("table_key").combine_chunks()).run_ends
    row_end = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, ends))
    position = pc.cumulative_sum(pa.repeat(pa.scalar(1, row_end.type), merged.num_rows))
    kept = merged.filter(pc.greater(position, pc.subtract(row_end, points)))
    finished_us = pc.cast(kept.column("finished_at"), pa.int64())
    checkpoint_us = pc.multiply(pc.shift_right(kept.column("checkpoint_after"), tso.PHYSICAL_SHIFT_BITS), 1000)
    lag_s = pc.divide(pc.cast(pc.max_element_wise(pc.subtract(finished_us, checkpoint_us), 0), pa.float64()), 1e6)
    return pa.table({"table_key": kept.column("table_key"), "finished_at": kept.column("finished_at"),
                     "lag_s": lag_s})


def _last_runs(log: pa.Table, runs: int) -> list[RunThroughput]:
    # Which runs are the last is decided by their finish alone; the costlier sums and distinct
    # counts are taken over those runs' rows only.
    finishes = log.group_by("run_id").aggregate([("finished_at", "max")]).sort_by("finished_at_max")
    last = finishes.column("run_id").slice(max(finishes.num_rows - runs, 0))
    log = log.filter(pc.is_in(log.column("run_id"), last.combine_chunks()))
    grouped = log.group_by("run_id").aggregate([("started_at", "min"), ("finished_at", "max"),
                                                ("table_key", "count_distinct"), ("rows_in", "sum")])
    grouped = grouped.sort_by("finished_at_max").slice(max(grouped.num_rows - runs, 0))
    return [RunThroughput(run_id=r["run_id"], started_at=r["started_at_min"], finished_at=r["finished_at_max"],
                          tables=r["table_key_count_distinct"], changes=r["rows_in_sum"])
            for r in grouped.to_pylist()]
