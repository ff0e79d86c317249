"""Where each replica stood when the merge DAG last announced it as an Airflow asset event, per
changefeed, kept in the lake (`_tidelake/announced`, a Delta table partitioned by changefeed).

A run compares the replicas with these states, not with their states at its own start, so a
commit made between runs by another merger (the merge follower, `tidelake merge` by hand, a run
whose publish task failed) is announced by the next run, once. Owner: the merge DAG's publish
task writes them, after computing the events it emits; its plan task reads them
(tidelake.orchestration.merge_dag).

More: docs/internals.md#announced_states.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import WATERMARKS_PROPERTIES, LakeLayout, open_or_create
from tidelake.orchestration.assets import ReplicaVersion

ANNOUNCED_SCHEMA = pa.schema(
    [
        pa.field("changefeed", pa.string(), nullable=False),
        pa.field("table", pa.string(), nullable=False),  # db.table
        pa.field("checkpoint_ts", pa.int64(), nullable=True),  # null: no replica yet when announced
        pa.field("delta_version", pa.int64(), nullable=True),
        pa.field("announced_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


def announced_states(layout: LakeLayout, changefeed_id: str) -> dict[str, ReplicaVersion | None]:
    """`db.table -> state` last announced for the changefeed (None: it had no replica then; {}
    before the changefeed's first announcement)."""
    path = layout.announced
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        return {}
    table = DeltaTable(path, storage_options=layout.storage_options)
    rows = read_delta(table, ["table", "checkpoint_ts", "delta_version"], f"changefeed = {sql_string(changefeed_id)}")
    return {r["table"]: None if r["checkpoint_ts"] is None else ReplicaVersion(r["checkpoint_ts"], r["delta_version"])
            for r in rows.to_pylist()}


def record_announced(layout: LakeLayout, changefeed_id: str, states: Mapping[str, ReplicaVersion | None]) -> None:
    """Record `states` as announced for the changefeed; its other tables keep their records. One
    writer per changefeed at a time (the merge DAG runs one at a time): two would lose an update."""
    table = open_or_create(layout, layout.announced, ANNOUNCED_SCHEMA, ("changefeed",), WATERMARKS_PROPERTIES)
    record = {**announced_states(layout, changefeed_id), **states}
    now = datetime.now(timezone.utc)
    rows = [{"changefeed": changefeed_id, "table": name, "checkpoint_ts": None if s is None else s.checkpoint_ts,
             "delta_version": None if s is None else s.delta_version, "announced_at": now}
            for name, s in sorted(record.items())]
    write_deltalake(table, pa.Table.from_pylist(rows, schema=ANNOUNCED_SCHEMA), mode="overwrite",
                    predicate=f"changefeed = {sql_string(changefeed_id)}")
