"""`tidelake status`: where each replica stands (docs/design.md#timestamps-and-watermarks) and how far
it lags, read without Spark; the per-table bounds are the merge planner's (table_plan.window_upper).
A replica's facts come from its last merge-log entry (never ahead of the replica, possibly one run
behind) or from its own log (`exact`). JSON: status_report.schema.json beside this file.
Owner: `tidelake status`; the Airflow plugin's page shows the same report.

More: docs/internals.md#status_report.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import StrEnum
from typing import Any

from tidelake import tso
from tidelake.lake.control import read_control
from tidelake.lake.history_table import history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaEntry, ReplicaState, read_entries
from tidelake.lake.replica_facts import ReplicaFacts, read_replica_facts
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import Watermarks
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, last_entries
from tidelake.merge.table_plan import window_upper

SCHEMA_VERSION = 1
STATE_PENDING = "pending"
STATUS_READERS = 16  # replica logs read at once


class NowSource(StrEnum):
    """Where status took "now" from, for lag."""

    PD = "pd"
    WALL_CLOCK = "wall_clock"


class FactsSource(StrEnum):
    """Where a replica's checkpoint, reader features, soft deletes and history came from."""

    MERGE_LOG = "merge_log"  # the table's last merge-log entry (what its last run read)
    REPLICA = "replica"  # the replica's own Delta log, read now


def utc_text(ts: int | None) -> str | None:
    """ISO-8601 UTC time of a TSO, millisecond precision, 'Z' suffix."""
    if ts is None:
        return None
    return tso.to_datetime(ts).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class PendingDdl:
    job_id: int
    commit_ts: int
    action: str
    query: str | None

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "commit_ts": self.commit_ts, "commit_utc": utc_text(self.commit_ts),
                "action": self.action, "query": self.query}


@dataclass(frozen=True)
class HistoryStatus:
    """A replica's SCD2 history table."""

    path: str
    checkpoint_ts: int | None
    since_ts: int | None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "checkpoint_ts": self.checkpoint_ts, "since_ts": self.since_ts}


@dataclass
class TableStatus:
    table: str
    table_key: int
    state: str
    path: str | None = None
    reason: str | None = None
    physical_ids: list[int] = field(default_factory=list)
    resolved_ts: int | None = None
    barrier_ts: int | None = None
    checkpoint_ts: int | None = None
    lag_seconds: float | None = None
    bound: str | None = None
    blocked: str | None = None
    pending_ddl: PendingDdl | None = None
    last_merge: MergeLogEntry | None = None
    last_error: str | None = None
    reader_features: list[str] | None = None
    deltalake_readable: bool | None = None
    soft_deletes: bool | None = None
    history: HistoryStatus | None = None
    facts_source: str | None = None  # FactsSource; None: no replica in the catalog

    def to_json(self) -> dict[str, Any]:
        merge = self.last_merge
        return {
            "table": self.table,
            "table_key": self.table_key,
            "state": self.state,
            "reason": self.reason,
            "path": self.path,
            "physical_ids": list(self.physical_ids),
            "resolved_ts": self.resolved_ts,
            "resolved_utc": utc_text(self.resolved_ts),
            "barrier_ts": self.barrier_ts,
            "barrier_utc": utc_text(self.barrier_ts),
            "checkpoint_ts": self.checkpoint_ts,
            "checkpoint_utc": utc_text(self.checkpoint_ts),
            "lag_seconds": self.lag_seconds,
            "bound": self.bound,
            "blocked": self.blocked,
            "pending_ddl": None if self.pending_ddl is None else self.pending_ddl.to_json(),
            "last_merge": None if merge is None else {
                "run_id": merge.run_id,
                "status": merge.status,
                "finished_at": _iso(merge.finished_at),
                "duration_s": merge.duration_s,
                "rows_in": merge.rows_in,
                "rows_out": merge.rows_out,
                "checkpoint_after": merge.checkpoint_after,
                "reason": merge.reason,
            },
            "last_error": self.last_error,
            "reader_features": self.reader_features,
            "deltalake_readable": self.deltalake_readable,
            "soft_deletes": self.soft_deletes,
            "history": None if self.history is None else self.history.to_json(),
            "facts_source": self.facts_source,
        }


@dataclass
class StatusReport:
    lake: str
    now_ts: int
    now_source: str
    ddl_resolved_ts: int | None
    changelog_version: int
    tables: list[TableStatus]
    generated_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    exact: bool = False  # every replica's facts read from its own log

    def behind(self, ts: int) -> list[TableStatus]:
        """Live tables whose replica has not reached `ts` (no replica yet counts; stopped ones do not)."""
        return [t for t in self.tables if t.state not in (ReplicaState.DROPPED, ReplicaState.STOPPED)
                and (t.checkpoint_ts is None or t.checkpoint_ts < ts)]

    def stopped(self) -> list[TableStatus]:
        return [t for t in self.tables if t.state == ReplicaState.STOPPED]

    def to_json(self) -> dict[str, Any]:
        """The stable machine-readable form, as status_report.schema.json describes it."""
        return {
            "schema_version": SCHEMA_VERSION,
            "generated_at": _iso(self.generated_at),
            "now_ts": self.now_ts,
            "now_utc": utc_text(self.now_ts),
            "now_source": self.now_source,
            "lake": self.lake,
            "ddl_resolved_ts": self.ddl_resolved_ts,
            "ddl_resolved_utc": utc_text(self.ddl_resolved_ts),
            "changelog_version": self.changelog_version,
            "exact": self.exact,
            "tables": [t.to_json() for t in self.tables],
        }


def collect_status(layout: LakeLayout, now_ts: int | None = None, exact: bool = False) -> StatusReport:
    """Status of every replicated table; `now_ts` is PD's TSO when the caller has one. Each replica's
    facts come from its last merge-log entry where that entry can be trusted, else from the
    replica's own log; `exact` reads every replica's log (module docstring, "Where the checkpoint
    comes from")."""
    source = NowSource.PD if now_ts is not None else NowSource.WALL_CLOCK
    if now_ts is None:
        now_ts = tso.compose(int(time.time() * 1000))
    control = read_control(layout)
    watermarks, history = control.watermarks, control.history
    entries = read_entries(layout)
    merges = last_entries(layout, {k for k, e in entries.items() if e.state != ReplicaState.DROPPED})
    keys = list(dict.fromkeys([*entries, *history.live_tables()]))
    facts = _replica_facts(layout, entries, merges, exact)
    tables = [_table_status(key, entries.get(key), facts.get(key), history, watermarks, merges.get(key), now_ts, layout)
              for key in keys]
    tables.sort(key=lambda t: (t.state == ReplicaState.DROPPED, t.table))
    return StatusReport(
        lake=layout.root,
        now_ts=now_ts,
        now_source=source,
        ddl_resolved_ts=watermarks.ddl_resolved or None,
        changelog_version=watermarks.changelog_version,
        tables=tables,
        exact=exact,
    )


def _replica_facts(layout: LakeLayout, entries: dict[int, ReplicaEntry], merges: dict[int, MergeLogEntry],
                   exact: bool) -> dict[int, tuple[ReplicaFacts | None, str]]:
    """Each catalogued replica's facts and where they came from (FactsSource)."""
    found: dict[int, tuple[ReplicaFacts | None, str]] = {}
    unread: list[ReplicaEntry] = []
    for key, entry in entries.items():
        merge = merges.get(key)
        logged = None if merge is None else merge.replica
        if not exact and logged is not None and logged.path == entry.path:
            found[key] = (logged, FactsSource.MERGE_LOG)
        else:
            unread.append(entry)
    # Each replica's log is its own read (a LIST and a few GETs on an object store): read them
    # side by side; delta-rs releases the GIL while it reads.
    with ThreadPoolExecutor(max_workers=STATUS_READERS) as pool:
        for entry, read in zip(unread, pool.map(lambda e: read_replica_facts(layout, e.path), unread)):
            found[entry.table_key] = (read, FactsSource.REPLICA)
    return found


def _table_status(key: int, entry: ReplicaEntry | None, read: tuple[ReplicaFacts | None, str] | None,  # None: no entry
                  history: SchemaHistory, watermarks: Watermarks, merge: MergeLogEntry | None, now_ts: int,
                  layout: LakeLayout) -> TableStatus:
    if entry is None:
        db, name = history.current_name(key)
        status = TableStatus(f"{db}.{name}", key, STATE_PENDING)
        checkpoint = None
    else:
        status = TableStatus(f"{entry.db}.{entry.name}", key, entry.state, entry.path, entry.reason)
        facts, status.facts_source = read
        checkpoint = None if facts is None else facts.checkpoint
        if facts is not None:
            needs = facts.reader_needs
            status.reader_features, status.deltalake_readable = list(needs.features), needs.deltalake_readable
            status.soft_deletes = facts.soft_deletes
            if facts.history:
                status.history = HistoryStatus(history_path(layout, entry.path), facts.history_checkpoint,
                                               facts.history_since)
    status.last_merge = merge
    if merge is not None and merge.status in (MergeStatus.ERROR, MergeStatus.STOPPED):
        status.last_error = merge.reason
    elif status.state == ReplicaState.STOPPED:
        status.last_error = entry.reason if entry is not None else None
    if status.state == ReplicaState.DROPPED:
        return status
    # Before the first merge, report where the first merge would start: the table's first ts.
    at = checkpoint if checkpoint is not None else history.ddl_events(key)[0].commit_ts
    status.checkpoint_ts = checkpoint
    if checkpoint is not None:
        status.lag_seconds = tso.lag_seconds(checkpoint, now_ts)
    status.physical_ids = history.physical_ids_at(key, at)
    resolved = [watermarks.table_resolved.get(pid) for pid in status.physical_ids]
    status.resolved_ts = min(resolved) if resolved and None not in resolved else None
    event = history.next_ddl_after(key, at)
    if event is not None:
        status.barrier_ts = event.barrier
        status.pending_ddl = PendingDdl(event.job_id, event.commit_ts, event.action_name, event.query)
    else:
        status.barrier_ts = watermarks.ddl_resolved or None
    _, bound, blocked = window_upper(at, status.physical_ids, watermarks, event.commit_ts if event else None)
    status.bound, status.blocked = (None, blocked) if blocked else (bound, None)
    return status
