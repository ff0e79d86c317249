"""`_tidelake/table_starts`, shared by bootstrap and the puller (tidelake.capture.changefeed.table_joins):
how a table joins a RUNNING changefeed at a ts J the puller chooses: bootstrap requests, the
puller lands the schema at J and feeds from J (`joined`), bootstrap reads at J and marks `done`.
Rows are only appended; a request's state is its last row.
Owner: `tidelake bootstrap` requests and marks `done`; the puller (table_joins) marks `joined`.

More: docs/internals.md#table_starts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import StrEnum

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tidelake.codec.ddl_job import ActionType
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import DdlSource, LakeLayout, open_or_create
from tidelake.table_names import table_key


class StartState(StrEnum):
    """Where a request to start a table stands."""

    REQUESTED = "requested"
    SCHEDULED = "scheduled"
    SCHEMA_LANDED = "schema_landed"
    JOINED = "joined"
    DONE = "done"
    REFUSED = "refused"
    # A shard passed the join ts before it saw the request (it was stopped meanwhile): nothing
    # was landed for the table, and bootstrap asks again with a new request.
    MISSED = "missed"


# The reason a MISSED request carries.
MISSED_JOIN = "passed the join ts before it saw the request"

TABLE_STARTS_SCHEMA = pa.schema(
    [
        pa.field("changefeed", pa.string(), nullable=False),
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("db", pa.string(), nullable=False),
        pa.field("table", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("start_ts", pa.int64(), nullable=False),  # J once joined, else 0
        pa.field("reason", pa.string(), nullable=True),  # why a request was refused
        pa.field("updated_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def table_starts_path(layout: LakeLayout) -> str:
    return f"{layout.tidelake_root}/table_starts"


@dataclass(frozen=True)
class TableStart:
    changefeed: str
    request_id: str
    db: str
    table: str
    state: str
    start_ts: int
    reason: str | None = None

    def same_table(self, db: str, table: str) -> bool:
        return table_key(self.db, self.table) == table_key(db, table)


class TableStarts:
    def __init__(self, layout: LakeLayout) -> None:
        self._layout = layout
        self._path = table_starts_path(layout)

    def _append(self, start: TableStart) -> None:
        table = open_or_create(self._layout, self._path, TABLE_STARTS_SCHEMA)
        row = {**start.__dict__, "updated_at": datetime.now(timezone.utc)}
        write_deltalake(table, pa.Table.from_pylist([row], schema=TABLE_STARTS_SCHEMA), mode="append")

    def request(self, changefeed: str, db: str, table: str) -> TableStart:
        start = TableStart(changefeed, uuid.uuid4().hex, db, table, StartState.REQUESTED, 0)
        self._append(start)
        return start

    def mark(self, start: TableStart, state: str, start_ts: int | None = None, reason: str | None = None) -> TableStart:
        marked = TableStart(start.changefeed, start.request_id, start.db, start.table, state,
                            start.start_ts if start_ts is None else start_ts, reason)
        self._append(marked)
        return marked

    def latest(self, changefeed: str) -> list[TableStart]:
        """The current state of every request of the changefeed, oldest request first."""
        if not DeltaTable.is_deltatable(self._path, storage_options=self._layout.storage_options):
            return []
        table = read_delta(DeltaTable(self._path, storage_options=self._layout.storage_options),
                           where=f"changefeed = {sql_string(changefeed)}")
        table = table.sort_by([("updated_at", "ascending")])
        last: dict[str, TableStart] = {}
        first_seen: dict[str, int] = {}
        for i, row in enumerate(table.drop_columns(["updated_at"]).to_pylist()):
            first_seen.setdefault(row["request_id"], i)
            if last.get(row["request_id"]) is None or _rank(row["state"]) >= _rank(last[row["request_id"]].state):
                last[row["request_id"]] = TableStart(**row)
        return sorted(last.values(), key=lambda s: first_seen[s.request_id])

    def pending(self, changefeed: str) -> list[TableStart]:
        return [s for s in self.latest(changefeed) if s.state == StartState.REQUESTED]


_RANKS = {StartState.REQUESTED: 0, StartState.SCHEDULED: 1, StartState.SCHEMA_LANDED: 2, StartState.JOINED: 3,
          StartState.REFUSED: 3, StartState.MISSED: 3, StartState.DONE: 4}


def _rank(state: str) -> int:
    """States only move forward; equal timestamps from two writers cannot move one back."""
    return _RANKS.get(state, 0)


def joined_table_rows(tables, ts: int) -> list[DdlRow]:
    """`ddl` snapshot rows (job id 0, commit ts J) of the tables that joined at J: their schema
    history starts there (tidelake.lake.schema_history treats a first snapshot row as the start).
    `tables` are the puller's TrackedTable values; partitions of one table give one row."""
    unique = {t.logical_id: t for t in tables}
    return [
        DdlRow(job_id=0, commit_ts=ts, schema_version=0, action=int(ActionType.CREATE_TABLE),
               action_name=ActionType.CREATE_TABLE.label, schema_id=t.db_id, schema_name=t.db,
               table_id=t.logical_id, table_name=t.table, query=None,
               table_info=json.dumps(t.info.to_json(), separators=(",", ":"), ensure_ascii=False),
               db_info=None, source=DdlSource.SNAPSHOT)
        for _, t in sorted(unique.items())
    ]
