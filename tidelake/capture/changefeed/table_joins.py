"""The puller's side of bootstrap's request to add a table to the running feed
(tidelake.lake.table_starts): the table joins at one ts J between two DDL jobs, its schema at J
and its data from J, on every shard at the same J. A mark is appended only once what it claims
has landed. Owner: the puller (shard 0 schedules J with several shards).

More: docs/internals.md#table_joins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tidelake import tso
from tidelake.capture.changefeed.ddl_puller import DdlPuller
from tidelake.capture.landing.lander import Lander
from tidelake.lake.ddl_log import has_snapshot_row
from tidelake.lake.layout import LakeLayout
from tidelake.lake.store_room import refusal
from tidelake.lake.table_starts import (
    MISSED_JOIN,
    StartState,
    TableStart,
    TableStarts,
    joined_table_rows,
)
from tidelake.upstream.schema_tracker import SchemaTracker, TrackedTable

log = logging.getLogger(__name__)

FeedFrom = Callable[[dict[int, TrackedTable], int], list[int]]


@dataclass(frozen=True)
class _Join:
    request: TableStart
    ts: int
    pids: list[int]  # physical ids this shard feeds from ts
    owner: bool  # this shard feeds the table's data (PullerConfig.shard_of)


class TableJoins:
    """Joins of one shard; poll() runs on the runner's loop, at_fence() inside its DDL callback."""

    def __init__(self, changefeed_id: str, shard: tuple[int, int], owner_of: Callable[[int], int],
                 layout: LakeLayout, lander: Lander, lock: threading.Lock, feed_from: FeedFrom,
                 now_ts: Callable[[], int], lead_s: float) -> None:
        self._cf = changefeed_id
        self._index, self._count = shard
        self._lands_schema = self._index == 0  # shard 0 lands every table's DDL
        self._owner_of = owner_of
        self._layout = layout
        self._lander = lander
        self._lock = lock
        self._feed_from = feed_from
        self._now_ts = now_ts
        self._lead_ms = int(lead_s * 1000)
        self.starts = TableStarts(layout)
        self._ddl: DdlPuller | None = None
        self._handled: set[str] = set()  # request ids this shard has added or fenced
        self._fenced: dict[int, list[TableStart]] = {}
        self._joins: list[_Join] = []  # added, not yet confirmed

    def restart(self, tracker: SchemaTracker, durable_tables: dict[int, int], ddl_start: int) -> list[tuple[str, str]]:
        """The tables a restarted shard feeds again: those that joined, and those it added in a
        run that stopped before every shard confirmed (a join ts above `ddl_start` is fenced
        again by poll())."""
        names = []
        for start in self.starts.latest(self._cf):
            if start.state in (StartState.JOINED, StartState.DONE):
                names.append((start.db, start.table))
            elif start.state in (StartState.SCHEDULED, StartState.SCHEMA_LANDED) and start.start_ts <= ddl_start:
                self._handled.add(start.request_id)
                join = self._landed_before(start, tracker, durable_tables)
                if join is None:
                    self._refuse(start, f"puller shard {self._index}/{self._count} {MISSED_JOIN} {start.start_ts}",
                                 StartState.MISSED)
                    continue
                names.append((start.db, start.table))
                self._joins.append(join)
        return names

    def attach(self, ddl: DdlPuller) -> None:
        """Fence the scheduled joins before the DDL puller streams: a restarted shard's DDL
        stream catches up fast and may cross J before the loop's first poll."""
        self._ddl = ddl
        if self._count > 1:
            self._poll_sharded()

    def poll(self) -> None:
        """Take up new requests, then confirm the joins that have landed. The lake unreachable
        (object_store gives up on a refused endpoint within seconds) fails this poll only: a
        request counts as handled once its outcome is written, so the next poll takes it up."""
        try:
            if self._count == 1:
                for request in self.starts.pending(self._cf):
                    if request.request_id not in self._handled:
                        with self._lock:
                            self._add(request, self._ddl.resolved_ts)
                        self._handled.add(request.request_id)
            else:
                self._poll_sharded()
            self.confirm()
        except OSError:
            log.warning("polling the table joins of changefeed %s failed; retrying", self._cf, exc_info=True)

    def at_fence(self, ts: int) -> None:
        """The DDL puller's job sequence reached `ts` (called with the runner's lock held)."""
        for request in self._fenced.pop(ts, []):
            self._add(request, ts)

    def confirm(self) -> None:
        if not self._joins:
            return
        try:
            self._lander.flush()
        except Exception as exc:  # the lander's flusher retries, and so does the next poll
            if refusal(exc) is None:  # a store without room: the lander says landing paused, once
                log.warning("flush of the tables joining changefeed %s failed; retrying", self._cf, exc_info=True)
            return
        durable, _ = self._lander.durable_watermarks()
        latest = {s.request_id: s for s in self.starts.latest(self._cf)} if self._count > 1 else {}
        waiting = []
        for join in self._joins:
            if any(durable.get(pid, 0) < join.ts for pid in join.pids):
                waiting.append(join)
            elif self._count == 1:
                self._mark_joined(join.request, join.ts)
            elif not self._confirm_sharded(join, latest.get(join.request.request_id)):
                waiting.append(join)
        self._joins = waiting

    # --- internals ---------------------------------------------------------------------

    def _poll_sharded(self) -> None:
        latest = self.starts.latest(self._cf)
        if self._lands_schema:
            latest = [self._schedule(s) if s.state == StartState.REQUESTED else s for s in latest]
        for request in latest:
            if request.state not in (StartState.SCHEDULED, StartState.SCHEMA_LANDED) or request.request_id in self._handled:
                continue
            with self._lock:
                ahead = request.start_ts > self._ddl.resolved_ts
                if ahead:
                    self._ddl.add_fence(request.start_ts)
                    self._fenced.setdefault(request.start_ts, []).append(request)
            if not ahead:
                self._refuse(request, f"puller shard {self._index}/{self._count} {MISSED_JOIN} {request.start_ts}",
                             StartState.MISSED)
            self._handled.add(request.request_id)

    def _schedule(self, request: TableStart) -> TableStart:
        """Shard 0 gives a request its join ts, ahead of every shard's DDL resolved ts."""
        at = tso.compose(tso.physical_ms(self._now_ts()) + self._lead_ms, 0)
        log.info("table %s.%s joins changefeed %s at ts %d (bootstrap request %s)", request.db, request.table,
                 self._cf, at, request.request_id)
        return self.starts.mark(request, StartState.SCHEDULED, start_ts=at)

    def _add(self, request: TableStart, ts: int) -> None:
        """Add the table to this shard's feed at `ts` (runner lock held)."""
        tracker = self._ddl.tracker
        joined = tracker.add_tables([(request.db, request.table)])
        named = tracker.named(request.db, request.table)
        if not named:
            self._refuse(request, f"no table {request.db}.{request.table} with rows at ts {ts}")
            return
        if self._lands_schema:
            self._lander.add_ddl(joined_table_rows(joined.values(), ts))
        pids = self._feed_from(joined, ts)
        self._joins.append(_Join(request, ts, pids, self._owns(named)))

    def _landed_before(self, start: TableStart, tracker: SchemaTracker, durable: dict[int, int]) -> _Join | None:
        """This shard's part of a join it made before a restart, if that part landed."""
        named = tracker.named(start.db, start.table)
        if not named:
            return None
        if self._lands_schema and not has_snapshot_row(self._layout, _logical_id(named), start.start_ts):
            return None
        owner = self._owns(named)
        pids = sorted(named) if owner else []
        if any(pid not in durable for pid in pids):
            return None
        return _Join(start, start.start_ts, pids, owner)

    def _owns(self, named: dict[int, TrackedTable]) -> bool:
        return self._owner_of(_logical_id(named)) == self._index

    def _confirm_sharded(self, join: _Join, state: TableStart | None) -> bool:
        """Append this shard's marks; False while the owner waits for shard 0's schema."""
        if state is None or state.state in (StartState.JOINED, StartState.DONE, StartState.REFUSED,
                                                StartState.MISSED):
            return True
        if self._lands_schema and state.state == StartState.SCHEDULED:
            state = self.starts.mark(state, StartState.SCHEMA_LANDED)
        if not join.owner:
            return True
        if state.state != StartState.SCHEMA_LANDED:
            return False
        self._mark_joined(state, join.ts)
        return True

    def _mark_joined(self, request: TableStart, ts: int) -> None:
        self.starts.mark(request, StartState.JOINED, start_ts=ts)
        log.info("table %s.%s joined changefeed %s at ts %d (bootstrap request %s)", request.db, request.table,
                 self._cf, ts, request.request_id)

    def _refuse(self, request: TableStart, reason: str, state: StartState = StartState.REFUSED) -> None:
        self.starts.mark(request, state, reason=reason)
        log.warning("bootstrap request %s for %s.%s refused: %s", request.request_id, request.db, request.table,
                    reason)


def _logical_id(named: dict[int, TrackedTable]) -> int:
    """The table of a physical id -> table map (its partitions share one logical id)."""
    return next(iter(named.values())).logical_id
