"""Take a syncpoint: merge every replicated table exactly to one aligned TSO S, then record S: the
latest interval boundary every table alive at S can reach now, recorded only when each of their
replicas has a Delta version at checkpoint S (stopped tables are listed, never left out
silently). Idempotent per S. Owner: `tidelake syncpoint` and the merge DAG.

More: docs/internals.md#cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pyspark.sql import SparkSession

from tidelake.failpoints import failpoint
from tidelake.lake.checkpoint import (
    checkpoint_at_version,
    read_checkpoint,
    version_at_checkpoint,
)
from tidelake.lake.control import read_control
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.schema_history import SchemaHistory, TableKey
from tidelake.lake.watermarks import Watermarks
from tidelake.merge.merge_run import MergeReport, run_merge
from tidelake.syncpoint.records import (
    ReplicaAt,
    Syncpoint,
    boundary_at_or_above,
    boundary_at_or_below,
    read_syncpoints,
    record_syncpoint,
)

SYNCPOINT_FAILPOINTS = ("syncpoint.before_record",)
MergeFn = Callable[..., MergeReport]  # run_merge(spark, layout, tables=[...], until_ts=S)
_NO_LIMIT = 1 << 63


class SyncpointOutcome(StrEnum):
    """How one attempt ended; INCOMPLETE and NO_ROOM are failures (the merge to S did not land)."""

    RECORDED = "recorded"
    ALREADY_RECORDED = "already recorded"  # another run recorded the same S first
    NOT_REACHABLE = "not reachable"  # no boundary after the last syncpoint is reachable yet
    WAITING = "waiting"  # replicas are past the last boundary; every table must reach the next
    HELD = "held"  # another writer held a replica the cut needed: the next attempt takes it
    INCOMPLETE = "incomplete"  # a replica has no Delta version at S
    NO_ROOM = "no room"  # the store refused a replica's write for lack of room: taken once it has room


@dataclass(frozen=True)
class SyncpointResult:
    ts: int | None  # the syncpoint aimed at (None when no boundary is reachable yet)
    outcome: SyncpointOutcome
    reason: str | None = None
    syncpoint: Syncpoint | None = None

    @property
    def recorded(self) -> bool:
        return self.outcome is SyncpointOutcome.RECORDED


def table_reach(history: SchemaHistory, table: TableKey, checkpoint: int | None, watermarks: Watermarks) -> int:
    """The highest ts the table can be merged to with the current watermarks."""
    events = history.ddl_events(table)
    pos = checkpoint if checkpoint is not None else events[0].commit_ts
    while True:
        ids = history.physical_ids_at(table, pos)
        if not ids:
            return _NO_LIMIT  # dropped: nothing more to wait for
        resolved = min(watermarks.table_resolved.get(pid, 0) for pid in ids)
        event = history.next_ddl_after(table, pos)
        if event is None or resolved < event.barrier:
            return max(pos, resolved)
        pos = event.commit_ts


def _alive_at(history: SchemaHistory, table: TableKey, ts: int) -> bool:
    return history.table_info_at(table, ts) is not None


def run_syncpoint(
    spark: SparkSession, layout: LakeLayout, interval_s: int, merge: MergeFn | None = None
) -> SyncpointResult:
    """Merge all tables to the next reachable boundary S and record the cut; idempotent per S."""
    merge = merge or run_merge
    control = read_control(layout)
    watermarks, history = control.watermarks, control.history
    catalog = ReplicaCatalog(layout)
    entries = catalog.entries()
    recorded = read_syncpoints(layout)
    last = recorded[-1].ts if recorded else 0

    stopped = {t: entries[t] for t in history.tables() if t in entries and entries[t].state == ReplicaState.STOPPED}
    tables = [t for t in history.tables() if t not in stopped]
    checkpoints = {t: read_checkpoint(entries[t].path, layout.storage_options) if t in entries else None
                   for t in tables}
    reach = min([watermarks.ddl_resolved] + [table_reach(history, t, checkpoints[t], watermarks) for t in tables])
    ts = boundary_at_or_below(reach, interval_s)
    ahead = max((c for t, c in checkpoints.items() if c is not None and _alive_at(history, t, ts)), default=0)
    if ahead > ts:
        ts = boundary_at_or_above(ahead, interval_s)
    if ts <= last:
        return SyncpointResult(None, SyncpointOutcome.NOT_REACHABLE, f"no boundary after the last syncpoint {last} is reachable yet "
                                            f"(tables reach {reach})")
    if ts > reach:
        return SyncpointResult(ts, SyncpointOutcome.WAITING, f"replicas are already at {ahead}; waiting for every table to reach {ts} "
                                          f"(now {reach})")

    included = [t for t in tables if _alive_at(history, t, ts)]
    behind = [t for t in included if checkpoints[t] is None or checkpoints[t] < ts]
    held: dict[int, str] = {}  # table key -> the line naming the writer that held its replica
    no_room: dict[int, str] = {}  # table key -> its line when the store refused its write for lack of room
    if behind:
        report = merge(spark, layout, tables=[".".join(history.current_name(t)) for t in behind], until_ts=ts)
        held = {r.table_key: r.reason for r in report.tables if r.held}
        no_room = {r.table_key: f"{r.table}: {r.reason}" for r in report.tables if r.no_room}

    entries = catalog.entries()
    replicas, excluded, problems = [], {}, []
    for t in included:
        entry = entries.get(t)
        if entry is not None and entry.state == ReplicaState.STOPPED:  # stopped during this merge
            excluded[".".join(history.current_name(t))] = entry.reason or "stopped"
            continue
        db, name = history.name_at(t, ts)
        version = version_at_checkpoint(entry.path, ts, layout.storage_options) if entry is not None else None
        if version is None or checkpoint_at_version(entry.path, version, layout.storage_options) != ts:
            if int(t) not in held and int(t) not in no_room:
                problems.append(f"{db}.{name} has no Delta version at checkpoint {ts}")
            continue
        replicas.append(ReplicaAt(int(t), db, name, entry.path, version))
    excluded.update({f"{e.db}.{e.name}": e.reason or "stopped" for e in stopped.values()
                     if _alive_at(history, e.table_key, ts)})
    if problems:
        return SyncpointResult(ts, SyncpointOutcome.INCOMPLETE,
                               "; ".join(problems + list(no_room.values()) + list(held.values())))
    if no_room:
        return SyncpointResult(ts, SyncpointOutcome.NO_ROOM, "; ".join(list(no_room.values()) + list(held.values())))
    if held:
        more = f" (and {len(held) - 1} more replicas held)" if len(held) > 1 else ""
        return SyncpointResult(ts, SyncpointOutcome.HELD, next(iter(held.values())) + more)
    syncpoint = Syncpoint(ts, replicas, excluded)
    failpoint("syncpoint.before_record", ts)
    if not record_syncpoint(layout, syncpoint):
        return SyncpointResult(ts, SyncpointOutcome.ALREADY_RECORDED, f"{ts} was already recorded", syncpoint)
    return SyncpointResult(ts, SyncpointOutcome.RECORDED, None, syncpoint)
