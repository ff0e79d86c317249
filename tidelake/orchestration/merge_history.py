"""Recent merge history from the merge log, for the Replication page's charts.

Each merge-log row says when a run finished, which checkpoint it left a table at and how many
changes it applied. From those the page draws two pictures an operator looks at first:
- lag over time per table: the lag a reader saw right after each merge, finished_at minus the
  time of checkpoint_after (rows without a checkpoint, e.g. errors, are no points);
- apply throughput per run: changes applied over the run's wall time (first start to last finish
  of its tables), so a run of many small tables is not counted as the sum of their durations.
The merge log is read once for both.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from deltalake import DeltaTable

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.merge_log import merge_log_path

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


def merge_history(layout: LakeLayout, points: int = DEFAULT_POINTS, runs: int = DEFAULT_RUNS) -> MergeHistory:
    """Per table key its last `points` lag points, and the last `runs` runs, oldest first."""
    path = merge_log_path(layout)
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        return MergeHistory({}, [])
    rows = (
        DeltaTable(path, storage_options=layout.storage_options)
        .to_pyarrow_table(columns=["run_id", "table_key", "checkpoint_after", "rows_in", "started_at", "finished_at"])
        .to_pylist()
    )
    rows.sort(key=lambda r: r["finished_at"])
    lag: dict[int, list[LagPoint]] = defaultdict(list)
    by_run: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_run[row["run_id"]].append(row)
        if row["checkpoint_after"] is None:
            continue
        seconds = (row["finished_at"] - tso.to_datetime(row["checkpoint_after"])).total_seconds()
        lag[row["table_key"]].append(LagPoint(row["finished_at"], max(seconds, 0.0)))
    run_list = sorted(
        (
            RunThroughput(
                run_id=run_id,
                started_at=min(r["started_at"] for r in members),
                finished_at=max(r["finished_at"] for r in members),
                tables=len({r["table_key"] for r in members}),
                changes=sum(r["rows_in"] for r in members),
            )
            for run_id, members in by_run.items()
        ),
        key=lambda run: run.finished_at,
    )
    return MergeHistory({key: values[-points:] for key, values in lag.items()}, run_list[-runs:])
