"""When new data makes a merge run worth starting ([merge].run_on_new_data): the changelog got
changes the watermarks now cover (or a lagging table waited PATIENCE_S), never sooner than the
floor after the previous event. Only when a run starts, never correctness: the trigger in
Airflow's triggerer decides with it (tidelake.orchestration.airflow.new_data_trigger).
Owner: the merge DAG's trigger (tidelake.orchestration.airflow.new_data_trigger).

More: docs/internals.md#new_data_watch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from tidelake import tso
from tidelake.lake.watermarks import Watermarks

PATIENCE_S = 60.0  # longest wait for the watermarks once new data is seen


@dataclass(frozen=True)
class _Landed:
    """A changelog version first seen at `since` (monotonic), its changes committed before `ts`."""

    version: int
    ts: int
    since: float


@dataclass
class NewDataWatch:
    """Feed it each poll of the watermarks; it says when to emit a new-data event."""

    floor_s: float
    seen_version: int | None = None  # changelog version the last event (or the first poll) covered
    pending: list[_Landed] = field(default_factory=list)  # newer versions, oldest first
    fired_at: float | None = None

    def observe(self, marks: Watermarks, now: float, wall: datetime | None = None) -> dict[str, int] | None:
        """The event to emit for this poll (its extra), or None. `now` is a monotonic clock;
        `wall` the wall clock a new version's TSO is taken from (default: now, UTC)."""
        version = marks.changelog_version
        if self.seen_version is None:  # first poll: what landed before the watch started is the schedule's
            self.seen_version = version
            return None
        newest = self.pending[-1].version if self.pending else self.seen_version
        if version > newest:
            self.pending.append(_Landed(version, tso.from_datetime(wall or datetime.now(timezone.utc)), now))
        if not self.pending or (self.fired_at is not None and now - self.fired_at < self.floor_s):
            return None
        covered = [p for p in self.pending if marks.reached(p.ts, marks.table_resolved)]
        if not covered and now - self.pending[0].since < PATIENCE_S:
            return None
        upto = covered[-1] if covered else self.pending[0]
        self.pending = [p for p in self.pending if p.version > upto.version]
        self.seen_version, self.fired_at = upto.version, now
        return {"changelog_version": upto.version, "resolved_ts": _resolved(marks)}


def _resolved(marks: Watermarks) -> int:
    """The ts every table and the DDL puller have reached: what the run can merge up to at least."""
    return min([marks.ddl_resolved, *marks.table_resolved.values()])
