"""The merge log: the latest entry per table, and logs written before the `replica` column."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from deltalake import write_deltalake

from tidelake.lake.layout import LakeLayout
from tidelake.lake.merge_log import (
    MERGE_LOG_SCHEMA,
    MergeLogEntry,
    MergeStatus,
    append_entries,
    last_entries,
    merge_log_path,
)
from tidelake.lake.replica_facts import ReplicaFacts

T0 = datetime(2026, 5, 1, tzinfo=timezone.utc)


def entry(run: str, key: int, finished_s: int, checkpoint: int, facts: ReplicaFacts | None = None) -> MergeLogEntry:
    finished = T0 + timedelta(seconds=finished_s)
    return MergeLogEntry(run, key, f"d.t{key}", MergeStatus.MERGED, None, checkpoint, 1, 0, 1, 1, 0.1, None,
                         finished, finished, facts)


def test_the_latest_entry_of_each_table_is_the_one_that_finished_last_whatever_the_append_order(tmp_path):
    layout = LakeLayout(str(tmp_path))
    rng = random.Random(3)
    finish = rng.sample(range(10_000), 12 * 8)  # distinct finish times in no particular order
    written: list[MergeLogEntry] = []
    for run in range(12):  # runs append in one order, finish in another (parallel runs, clock skew)
        batch = [entry(f"r{run}", key, finish.pop(), 1000 * run + key,
                       ReplicaFacts(f"p{key}", 1000 * run + key, 1, (), key % 2 == 0, False, None, None))
                 for key in rng.sample(range(20), 8)]
        append_entries(layout, batch)
        written += batch
    expected: dict[int, MergeLogEntry] = {}
    for e in written:
        if e.table_key not in expected or e.finished_at > expected[e.table_key].finished_at:
            expected[e.table_key] = e
    assert last_entries(layout) == expected


def test_a_merge_log_without_the_replica_column_gains_it_on_the_next_append(tmp_path):
    layout = LakeLayout(str(tmp_path))
    old_schema = pa.schema([f for f in MERGE_LOG_SCHEMA if f.name != "replica"])
    old = entry("old", 1, 0, 5)
    write_deltalake(merge_log_path(layout), pa.Table.from_pylist(
        [{f.name: getattr(old, f.name) for f in old_schema}], schema=old_schema))
    facts = ReplicaFacts("p", 9, 1, (), False, False, None, None)
    append_entries(layout, [entry("new", 2, 1, 9, facts)])
    entries = last_entries(layout)
    assert entries[1] == old and entries[1].replica is None
    assert entries[2].replica == facts
