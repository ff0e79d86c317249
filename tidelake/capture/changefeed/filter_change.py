"""A changefeed's `[filter].rules` widened between two runs of its puller: a table the rules now
select that the changefeed never fed has rows and a schema from before the restart that no
changelog holds. It must not be fed from the restart ts as if it had always been there (its
earlier rows would be lost, and the merge would have no schema to start it from): it joins the
running changefeed at a ts J like a table `tidelake bootstrap` adds (tidelake.lake.table_starts),
and bootstrap reads it at J. Until it joins, every shard holds it back.
Owner: the puller (puller_runner._prepare); shard 0 writes the requests.

More: docs/operations.md#changing-the-table-filter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tidelake.capture.changefeed.reshard import layout_of
from tidelake.lake.layout import LakeLayout
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.table_starts import StartState, TableStart, TableStarts
from tidelake.lake.watermarks import read_by_puller
from tidelake.table_names import table_key
from tidelake.upstream.schema_tracker import SchemaTracker, TrackedTable

log = logging.getLogger(__name__)

# Request states a table's join is still on its way in (table_joins takes them up).
_OPEN = (StartState.REQUESTED, StartState.SCHEDULED, StartState.SCHEMA_LANDED)


@dataclass(frozen=True)
class Widening:
    """Tables the rules select that the changefeed has never fed, by logical id."""

    joining: dict[int, TrackedTable]  # held back until their join
    unrequested: list[TrackedTable]  # of those, the ones no open request names yet


def fed_physical_ids(layout: LakeLayout, changefeed_id: str, durable: dict[int, int]) -> set[int]:
    """Physical ids some puller of the changefeed (any shard, any layout) has a watermark for."""
    fed = set(durable)
    for name, marks in read_by_puller(layout).items():
        if layout_of(name, changefeed_id) is not None:
            fed |= set(marks.marks.table_resolved)
    return fed


def widening(tracker: SchemaTracker, fed: set[int], starts: list[TableStart], layout: LakeLayout) -> Widening:
    """What a restarted shard holds back: a selected table none of whose physical ids was ever
    fed and that the lake's schema history does not know. A table of the start snapshot or one
    that came in by a DDL is in that history even when the shard owning it never ran."""
    tables: dict[int, TrackedTable] = {}
    pids: dict[int, list[int]] = {}
    for pid, table in tracker.replicated().items():
        tables[table.logical_id] = table
        pids.setdefault(table.logical_id, []).append(pid)
    unfed = {lid: t for lid, t in tables.items() if not fed.intersection(pids[lid])}
    history = SchemaHistory.load(layout) if unfed else None
    joining = {lid: t for lid, t in unfed.items()
               if all(history.table_of_physical_id(pid) is None for pid in pids[lid])}
    requested = {table_key(s.db, s.table) for s in starts if s.state in _OPEN}
    unrequested = [t for t in joining.values() if table_key(t.db, t.table) not in requested]
    return Widening(joining, unrequested)


def request_joins(starts: TableStarts, changefeed_id: str, tables: list[TrackedTable]) -> None:
    """Ask the running changefeed to add `tables` (a bootstrap request, made by the puller)."""
    for table in tables:
        request = starts.request(changefeed_id, table.db, table.table)
        log.warning("table %s.%s is selected by [filter].rules but changefeed %s has never fed it: it joins the "
                    "running changefeed (request %s); then `tidelake bootstrap` (or the bootstrap DAG) reads its "
                    "rows where it joined", table.db, table.table, changefeed_id, request.request_id)
