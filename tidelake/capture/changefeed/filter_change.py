"""A changefeed's `[filter].rules` changed between two runs of its puller. A table newly selected
that was never fed joins at one ts J like a table `tidelake bootstrap` adds (its earlier rows are
in no changelog), held back by every shard until then. A fed table no longer selected leaves where
its data is complete, L = its watermark + 1 (its last DDL + 1 where the watermark lags that DDL:
the shard owning it feeds it on until L - 1 first): shard 0 lands a `filter` row there, a DROP
TABLE for the replica side, so no syncpoint waits for it. A table that left cannot rejoin (its replica would
miss what changed meanwhile): it is held back and named.
Owner: the puller (puller_runner._prepare); shard 0 files the requests and the `filter` rows.

More: docs/operations.md#changing-the-table-filter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidelake.capture.changefeed.reshard import layout_of
from tidelake.codec.ddl_job import ActionType
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.layout import FILTER_LEFT_BECAUSE, DdlSource, LakeLayout
from tidelake.lake.schema_history import SchemaHistory, TableKey
from tidelake.lake.table_starts import StartState, TableStart, TableStarts
from tidelake.lake.watermarks import read_by_puller, read_watermarks
from tidelake.table_names import table_key
from tidelake.upstream.schema_tracker import SchemaTracker, TrackedTable

log = logging.getLogger(__name__)

# Request states a table's join is still on its way in (table_joins takes them up).
_OPEN = (StartState.REQUESTED, StartState.SCHEDULED, StartState.SCHEMA_LANDED)
LEAVE_NAME = "leave changefeed ([filter].rules)"


@dataclass(frozen=True)
class FilterChange:
    """What a restarted shard does about the rules' change; tables by logical id."""

    held: dict[int, TrackedTable]  # not fed now: joining, or left for good
    unrequested: list[TrackedTable]  # joining tables no open request names yet
    left: list[TrackedTable]  # left before, selected again: never fed again
    leaving: list[DdlRow]  # the `filter` rows of tables the rules no longer select
    draining: dict[int, tuple[int, int]]  # physical id -> (logical id, L): fed on until L - 1, then not


def filter_change(tracker: SchemaTracker, layout: LakeLayout, changefeed_id: str, durable: dict[int, int],
                  starts: list[TableStart]) -> FilterChange:
    """Compare the tables the rules select at the restart with those the lake says were fed.
    A table the lake's schema history knows was fed, even when the shard owning it never ran
    (start snapshot) or when it came in by a DDL."""
    history = SchemaHistory.load(layout, jobs_until=tracker.ts)  # the jobs the tracker has seen, no later
    fed = _fed_physical_ids(layout, changefeed_id, durable)
    selected: dict[int, TrackedTable] = {}
    pids: dict[int, list[int]] = {}
    for pid, table in tracker.replicated().items():
        selected[table.logical_id] = table
        pids.setdefault(table.logical_id, []).append(pid)
    owners = {pid: key for key in history.tables() for pid in history.all_physical_ids(key)}
    joining, left = {}, {}
    for lid, table in selected.items():
        known = {owners[pid] for pid in pids[lid] if pid in owners}
        if any(_left_by_filter(history, key) for key in known):
            left[lid] = table
        elif not known and not fed.intersection(pids[lid]):
            joining[lid] = table
    requested = {table_key(s.db, s.table) for s in starts if s.state in _OPEN}
    unrequested = [t for t in joining.values() if t.key not in requested]
    asked = {table_key(s.db, s.table) for s in starts}  # bootstrap's tables stay, in or out of the rules
    leaving, draining = _leaving(tracker, history, read_watermarks(layout).table_resolved, asked)
    return FilterChange({**joining, **left}, unrequested, list(left.values()), leaving, draining)


def request_joins(starts: TableStarts, changefeed_id: str, tables: list[TrackedTable]) -> None:
    """Ask the running changefeed to add `tables` (a bootstrap request, made by the puller)."""
    for table in tables:
        request = starts.request(changefeed_id, table.db, table.table)
        log.warning("table %s.%s is selected by [filter].rules but changefeed %s has never fed it: it joins the "
                    "running changefeed (request %s); then `tidelake bootstrap` (or the bootstrap DAG) reads its "
                    "rows where it joined", table.db, table.table, changefeed_id, request.request_id)


def say_left(changefeed_id: str, left: list[TrackedTable], leaving: list[DdlRow]) -> None:
    """One line per table that leaves now, and per table that left and is selected again."""
    for row in leaving:
        log.warning("table %s.%s leaves changefeed %s at ts %d: %s; its replica stays readable as of then, "
                    "marked dropped", row.schema_name, row.table_name, changefeed_id, row.commit_ts,
                    FILTER_LEFT_BECAUSE)
    for table in left:
        log.warning("table %s.%s left changefeed %s when [filter].rules stopped selecting it and cannot rejoin it "
                    "(its replica would miss what changed meanwhile): it is not fed; replicate it with a new "
                    "changefeed", table.db, table.table, changefeed_id)


def _fed_physical_ids(layout: LakeLayout, changefeed_id: str, durable: dict[int, int]) -> set[int]:
    """Physical ids some puller of the changefeed (any shard, any layout) has a watermark for."""
    fed = set(durable)
    for name, marks in read_by_puller(layout).items():
        if layout_of(name, changefeed_id) is not None:
            fed |= set(marks.marks.table_resolved)
    return fed


def _left_by_filter(history: SchemaHistory, key: TableKey) -> bool:
    last = history.ddl_events(key)[-1]
    return last.drops_table and last.source == DdlSource.FILTER


def _leaving(tracker: SchemaTracker, history: SchemaHistory, resolved: dict[int, int],
             asked: set[str]) -> tuple[list[DdlRow], dict[int, tuple[int, int]]]:
    """A `filter` row for each live table of the history that exists upstream but that the rules
    no longer select and no bootstrap request names, at L = max(its folded watermark, its last
    DDL) + 1. Where the watermark lags the last DDL, the table is fed on until L - 1 (`draining`)."""
    rows, draining = [], {}
    selected = set(tracker.replicated())
    for key in history.live_tables():
        events = history.ddl_events(key)
        info = events[-1].table_info_after
        ids = info.physical_ids()
        db, name = history.current_name(key)
        upstream = tracker.named(db, name)
        # Still fed: by the ids the lake knows, or by those upstream has at the restart, which a DDL
        # job not finished by then may have changed already (its meta is written before it is done).
        if selected.intersection(ids) or selected.intersection(upstream):
            continue
        if not upstream or table_key(db, name) in asked:
            continue  # gone upstream (its DROP is a DDL the puller lands), or bootstrap's
        at = max(min(resolved.get(pid, 0) for pid in ids), events[-1].commit_ts) + 1
        draining.update({pid: (info.id, at) for pid in ids if resolved.get(pid, 0) < at - 1})
        rows.append(DdlRow(job_id=0, commit_ts=at, schema_version=0, action=int(ActionType.DROP_TABLE),
                           action_name=LEAVE_NAME, schema_id=events[-1].schema_id, schema_name=db,
                           table_id=info.id, table_name=name, query=None, table_info=None, db_info=None,
                           source=DdlSource.FILTER))
    return rows, draining
