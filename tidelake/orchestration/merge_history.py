"""Recent merge history from the merge log, for the Replication page's charts.

Each merge-log row says when a run finished, which checkpoint it left a table at and how many
changes it applied. From those the page draws two pictures an operator looks at first:
- lag over time per table: the lag a reader saw right after each merge, finished_at minus the
  time of checkpoint_after (rows without a checkpoint, e.g. errors, are no points);
- apply throughput per run: changes applied over the run's wall time (first start to last finish
  of its tables), so a run of many small tables is not counted as the sum of their durations.
The merge log is read once for both, and only its last merge_log.RECENT (4 hours before the newest
entry): the page says so (`MergeHistory.newest`, the report's `history_window`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.merge_log import RECENT, recent_entries

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
    lag: dict[int, list[LagPoint]]
    runs: list[RunThroughput]
    newest: datetime | None = None  # the newest entry's finish; what is shown starts RECENT before

    def window_json(self) -> dict[str, object] | None:
        """The page report's `history_window`: which stretch of the merge log the charts cover."""
        if self.newest is None:
            return None
        return {"since": (self.newest - RECENT).isoformat(), "until": self.newest.isoformat(),
                "hours": RECENT.total_seconds() / 3600}


def merge_history(layout: LakeLayout, points: int = DEFAULT_POINTS, runs: int = DEFAULT_RUNS) -> MergeHistory:
    """Per table key its last `points` lag points, and the last `runs` runs, oldest first, within
    RECENT. That still holds a row per table per run (48,000 at the default 5-minute schedule over
    1,000 tables): it is grouped, sorted and cut in Arrow, and only what the page shows becomes
    Python objects."""
    log, newest = recent_entries(layout, ["run_id", "table_key", "checkpoint_after", "rows_in", "started_at",
                                          "finished_at"])
    if newest is None:
        return MergeHistory({}, [])
    return MergeHistory(_lag_points(log, points), _last_runs(log, runs), newest)


def _lag_points(log: pa.Table, points: int) -> dict[int, list[LagPoint]]:
    merged = log.filter(pc.is_valid(log.column("checkpoint_after")))
    if merged.num_rows == 0:
        return {}
    merged = merged.take(pc.sort_indices(merged, [("table_key", "ascending"), ("finished_at", "ascending")]))
    keys = merged.column("table_key").combine_chunks()
    starts = [0, *(i + 1 for i in pc.indices_nonzero(pc.not_equal(keys[1:], keys[:-1])).to_pylist())]
    ends = [*starts[1:], merged.num_rows]
    kept = merged.take(pa.array([i for s, e in zip(starts, ends) for i in range(max(s, e - points), e)], pa.int64()))
    finished_us = pc.cast(kept.column("finished_at"), pa.int64())
    checkpoint_us = pc.multiply(pc.shift_right(kept.column("checkpoint_after"), tso.PHYSICAL_SHIFT_BITS), 1000)
    lag_s = pc.divide(pc.cast(pc.max_element_wise(pc.subtract(finished_us, checkpoint_us), 0), pa.float64()), 1e6)
    lag: dict[int, list[LagPoint]] = defaultdict(list)
    for key, at, seconds in zip(kept.column("table_key").to_pylist(), kept.column("finished_at").to_pylist(),
                                lag_s.to_pylist()):
        lag[key].append(LagPoint(at, seconds))
    return dict(lag)


def _last_runs(log: pa.Table, runs: int) -> list[RunThroughput]:
    grouped = log.group_by("run_id").aggregate([("started_at", "min"), ("finished_at", "max"),
                                                ("table_key", "count_distinct"), ("rows_in", "sum")])
    grouped = grouped.sort_by("finished_at_max").slice(max(grouped.num_rows - runs, 0))
    return [RunThroughput(run_id=r["run_id"], started_at=r["started_at_min"], finished_at=r["finished_at_max"],
                          tables=r["table_key_count_distinct"], changes=r["rows_in_sum"])
            for r in grouped.to_pylist()]
