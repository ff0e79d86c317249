"""The merge log: one row per table per merge run, for `tidelake status` and the Airflow page.

A Delta table (`_tidelake/merge_log`) that every run APPENDS to with delta-rs: blind appends
never conflict (docs/stack.md §12), so mapped merge tasks of one Airflow run can log at the
same time, and reading "the last merge of each table" needs no Spark. The replica's own Delta
commit stays the truth for the checkpoint; this is the history around it (durations, sizes,
why a table is waiting, stopped or failing) and, in `replica`, what the replica's log said once
the run was done with the table (tidelake.lake.replica_facts): status reads 1,000 replicas'
facts from here instead of 1,000 logs. Logs written before that column have no `replica`; the
first append adds it (schema merge, a metadata change Delta allows on append).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from tidelake.lake.layout import LakeLayout, open_or_create
from tidelake.lake.replica_facts import REPLICA_FACTS_TYPE, ReplicaFacts


class MergeStatus(StrEnum):
    """How one table's part of a merge run ended."""

    MERGED = "merged"  # advanced (data, DDL or an empty window)
    IDLE = "idle"  # nothing new within the bounds
    BLOCKED = "blocked"  # cannot advance yet (e.g. a partition without a resolved ts)
    STOPPED = "stopped"  # an unsupported DDL stopped the table (needs an operator)
    ERROR = "error"  # this run failed for the table; the next run retries


MERGE_LOG_SCHEMA = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("table_key", pa.int64(), nullable=False),
        pa.field("table_name", pa.string(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("checkpoint_before", pa.int64(), nullable=True),
        pa.field("checkpoint_after", pa.int64(), nullable=True),
        pa.field("windows", pa.int64(), nullable=False),
        pa.field("ddls_applied", pa.int64(), nullable=False),
        pa.field("rows_in", pa.int64(), nullable=False),
        pa.field("rows_out", pa.int64(), nullable=False),
        pa.field("duration_s", pa.float64(), nullable=False),
        pa.field("reason", pa.string(), nullable=True),
        pa.field("started_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("finished_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("replica", REPLICA_FACTS_TYPE, nullable=True),
    ]
)


@dataclass(frozen=True)
class MergeLogEntry:
    """What one run did to one table. rows_in: changes merged after collapsing per key;
    rows_out: replica rows inserted + updated + deleted."""

    run_id: str
    table_key: int
    table_name: str
    status: str
    checkpoint_before: int | None
    checkpoint_after: int | None
    windows: int
    ddls_applied: int
    rows_in: int
    rows_out: int
    duration_s: float
    reason: str | None
    started_at: datetime
    finished_at: datetime
    replica: ReplicaFacts | None = None  # None: not read (no replica, or the read failed)


def merge_log_path(layout: LakeLayout) -> str:
    return f"{layout.tidelake_root}/merge_log"


@retry(
    retry=retry_if_exception_type(CommitFailedError),
    stop=stop_after_attempt(8),
    wait=wait_random_exponential(multiplier=0.05, max=2),
    reraise=True,
)
def append_entries(layout: LakeLayout, entries: Sequence[MergeLogEntry]) -> None:
    """Append one run's entries in one commit."""
    if not entries:
        return
    table = open_or_create(layout, merge_log_path(layout), MERGE_LOG_SCHEMA, added_columns=1)
    rows = [{**asdict(e), "replica": None if e.replica is None else e.replica.to_row()} for e in entries]
    data = pa.Table.from_pylist(rows, schema=MERGE_LOG_SCHEMA)
    write_deltalake(table, data, mode="append", schema_mode="merge")


def last_entries(layout: LakeLayout) -> dict[int, MergeLogEntry]:
    """The latest entry of each table key (by finish time).
    The log holds a row per table per run: they are sorted and picked in Arrow, and only the
    picked rows become Python objects (status reads this on every call)."""
    if not DeltaTable.is_deltatable(merge_log_path(layout), storage_options=layout.storage_options):
        return {}
    table = DeltaTable(merge_log_path(layout), storage_options=layout.storage_options).to_pyarrow_table()
    if table.num_rows == 0:
        return {}
    table = table.take(pc.sort_indices(table, [("table_key", "ascending"), ("finished_at", "ascending")]))
    keys = table.column("table_key").combine_chunks()
    last_of_key = pa.concat_arrays([pc.not_equal(keys[1:], keys[:-1]), pa.array([True])])
    names = [f.name for f in fields(MergeLogEntry)]
    latest: dict[int, MergeLogEntry] = {}
    for row in table.filter(last_of_key).to_pylist():
        row["replica"] = ReplicaFacts.from_row(row.get("replica"))
        latest[row["table_key"]] = MergeLogEntry(**{n: row.get(n) for n in names})
    return latest
