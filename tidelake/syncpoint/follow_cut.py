"""The merge follower's syncpoints: the cap its passes stop at (the first boundary above the last
recorded cut, tidelake.syncpoint.records.merge_cap; before the first, one above the watermarks),
when a cut may be due from the watermarks alone, and taking it with run_syncpoint, so the cap
moves on without a scheduled run. A cut that was not reachable is tried again once the
watermarks show every table at the boundary, or after a pause.
Owner: the merge follower (tidelake.merge.follow), wired by `tidelake merge --follow`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import Watermarks
from tidelake.syncpoint.cut import MergeFn, SyncpointOutcome, run_syncpoint
from tidelake.syncpoint.records import boundary_at_or_below, next_boundary, read_syncpoints

RETRY_CAP_S = 10.0  # longest pause before a cut that was not reachable is tried again


class FollowerCuts:
    """tidelake.merge.follow.CutSteps for one lake at `interval_s`; `publish` runs after each
    recorded cut (the Iceberg catalog, as the syncpoint job does) and returns lines to print."""

    def __init__(self, layout: LakeLayout, interval_s: int,
                 publish: Callable[[], list[str]] | None = None) -> None:
        self.layout, self.interval_s, self.publish = layout, interval_s, publish
        self._last: int | None = None
        self._retry_at = 0.0
        self._tried: int | None = None  # the boundary of the last attempt that recorded nothing
        self._target: int | None = None
        self._first: int | None = None  # the cap before the first cut (see cap)
        self._floor = self._tried_floor = 0  # the DDL watermark's boundary now, and at the last failed try
        self._read_last()

    def _read_last(self) -> None:
        recorded = read_syncpoints(self.layout)
        self._last = recorded[-1].ts if recorded else None

    def cap(self, marks: Watermarks) -> int | None:
        """Read again at each pass: a cut recorded by hand (`tidelake syncpoint`) moves it too.
        Before the first cut, the first boundary above the DDL watermark the follower first saw:
        merging on without a cap, the replicas would always be past the boundary the cut aims at
        before every table could reach it, and no first cut would ever be taken."""
        self._read_last()
        if self._last is not None:
            return next_boundary(self._last, self.interval_s)
        if self._first is None and marks.ddl_resolved > 0:
            self._first = next_boundary(marks.ddl_resolved, self.interval_s)
        return self._first

    def due(self, marks: Watermarks, now: float) -> bool:
        if marks.ddl_resolved <= 0:
            return False
        self._floor = boundary_at_or_below(marks.ddl_resolved, self.interval_s)
        if self._last is None:  # the first cut, above every checkpoint: worth a try at each new boundary
            return self._floor > self._tried_floor or now >= self._retry_at
        self._target = next_boundary(self._last, self.interval_s)
        if marks.ddl_resolved < self._target:
            return False
        # Every watermark at the boundary is the fast path; a row a puller no longer moves (a dropped
        # table's) must not hold the cut back, so it is tried after a pause either way.
        everyone = min(marks.table_resolved.values(), default=0) >= self._target
        return (everyone and self._target != self._tried) or now >= self._retry_at

    def take(self, spark: SparkSession, now: float, merge: MergeFn) -> tuple[bool, list[str]]:
        result = run_syncpoint(spark, self.layout, self.interval_s, merge)
        recorded = result.outcome in (SyncpointOutcome.RECORDED, SyncpointOutcome.ALREADY_RECORDED)
        lines: list[str] = []
        if result.outcome is SyncpointOutcome.RECORDED:
            cut = result.syncpoint
            lines.append(f"syncpoint {result.ts} ({tso.to_datetime(result.ts):%Y-%m-%d %H:%M:%S} UTC): "
                         f"{len(cut.replicas)} replicas" + (f", left out: {cut.excluded}" if cut.excluded else ""))
        elif result.outcome in (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.NO_ROOM, SyncpointOutcome.HELD):
            lines.append(f"syncpoint {result.ts} not taken now ({result.outcome}): {result.reason}")
        if recorded:
            self._read_last()
            self._tried, self._retry_at = None, 0.0
            if self.publish is not None:
                lines.extend(self.publish())
        else:
            self._tried = result.ts if result.ts is not None else self._target
            self._tried_floor = self._floor
            # Not reachable yet, or a replica held by another writer (maintenance, a bootstrap: its
            # turn is short, and every pass waits at this cut's cap): soon again. Failed (a replica
            # missing, no room): at the next interval, as a scheduled run would, so its line is not
            # repeated every few seconds.
            soon = result.outcome in (SyncpointOutcome.WAITING, SyncpointOutcome.NOT_REACHABLE, SyncpointOutcome.HELD)
            self._retry_at = now + (min(self.interval_s / 2, RETRY_CAP_S) if soon else self.interval_s)
        return recorded, lines
