"""The merge log: the latest entry per table, its bounded reads and maintenance, and logs written
before the `replica` column or the table properties."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest
from deltalake import DeltaTable, write_deltalake

from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_facts import ReplicaFacts
from tidelake.merge.merge_log import (
    MERGE_LOG_PROPERTIES,
    MERGE_LOG_SCHEMA,
    RECENT,
    MergeLogEntry,
    MergeStatus,
    append_entries,
    last_entries,
    merge_log_path,
    recent_entries,
    trim,
)

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


def recount(written: list[MergeLogEntry], keys) -> dict[int, MergeLogEntry]:
    """The latest entry per key among those within RECENT of the newest, row by row."""
    newest = max(e.finished_at for e in written)
    out: dict[int, MergeLogEntry] = {}
    for e in written:
        if e.finished_at >= newest - RECENT and (keys is None or e.table_key in keys):
            if e.table_key not in out or e.finished_at > out[e.table_key].finished_at:
                out[e.table_key] = e
    return out


def many_runs(layout: LakeLayout, rng: random.Random, runs: int = 40) -> list[MergeLogEntry]:
    """Runs 10 minutes apart over 20 tables (some skipped, one only in early runs, appended out of
    order), the last far enough from the first that the early ones fall out of RECENT."""
    written = []
    order = list(range(runs))
    rng.shuffle(order)
    for run in order:
        tables = [k for k in range(20) if rng.random() < 0.7 and (k != 19 or run < 5)]
        batch = [entry(f"r{run}", key, 600 * run + rng.randrange(0, 300), 1000 * run + key) for key in tables]
        append_entries(layout, batch)
        written += batch
    return written


def test_status_reads_newest_files_first_and_finds_what_a_full_recount_finds(tmp_path):
    layout = LakeLayout(str(tmp_path))
    written = many_runs(layout, random.Random(7))
    for keys in (None, {1, 2}, set(range(19)), {19}, {99}, set()):
        assert last_entries(layout, keys) == recount(written, keys)
    assert 19 not in last_entries(layout, {19})  # only in runs older than RECENT: status reads its replica


def test_maintenance_trim_keeps_what_status_and_the_page_read(tmp_path):
    layout = LakeLayout(str(tmp_path))
    written = many_runs(layout, random.Random(8), runs=60)
    asked = (None, frozenset({3}), frozenset(range(19)))
    before = {k: last_entries(layout, k) for k in asked}
    assert before == {k: recount(written, k) for k in asked}
    page_before = recent_entries(layout, ["run_id", "table_key", "finished_at"])
    log = DeltaTable(merge_log_path(layout))
    newest = max(e.finished_at for e in written)
    deleted, compacted = trim(log, RECENT + timedelta(hours=1))
    kept = DeltaTable(merge_log_path(layout)).to_pyarrow_table(columns=["finished_at"]).column("finished_at")
    assert deleted == sum(e.finished_at < newest - RECENT - timedelta(hours=1) for e in written) > 0
    assert pa.compute.min(kept).as_py() >= newest - RECENT - timedelta(hours=1)
    assert compacted > 1 and len(DeltaTable(merge_log_path(layout)).file_uris()) == 1
    assert {k: last_entries(layout, k) for k in before} == before
    page_after = recent_entries(layout, ["run_id", "table_key", "finished_at"])
    assert page_after[1] == page_before[1] == newest
    assert sorted(page_after[0].to_pylist(), key=str) == sorted(page_before[0].to_pylist(), key=str)
    configuration = DeltaTable(merge_log_path(layout)).metadata().configuration
    assert {k: configuration.get(k) for k in MERGE_LOG_PROPERTIES} == MERGE_LOG_PROPERTIES


def test_a_log_from_before_bounded_reads_is_read_and_trimmed(tmp_path):
    """An old lake's log: no table properties, no `replica` column, one file for all runs."""
    layout = LakeLayout(str(tmp_path))
    old_schema = pa.schema([f for f in MERGE_LOG_SCHEMA if f.name != "replica"])
    old = [entry(f"r{run}", key, 3600 * run, run) for run in range(8) for key in range(3)]
    write_deltalake(merge_log_path(layout), pa.Table.from_pylist(
        [{f.name: getattr(e, f.name) for f in old_schema} for e in old], schema=old_schema))
    assert last_entries(layout, {0, 1, 2}) == recount(old, None)
    trim(DeltaTable(merge_log_path(layout)), RECENT)
    assert last_entries(layout, {0, 1, 2}) == recount(old, None)
    assert DeltaTable(merge_log_path(layout)).to_pyarrow_table().num_rows == 3 * 5  # runs 3..7 within RECENT


def test_a_retention_shorter_than_what_readers_read_is_refused(tmp_path):
    layout = LakeLayout(str(tmp_path))
    append_entries(layout, [entry("r", 1, 0, 1)])
    with pytest.raises(InputError, match="merge log retention"):
        trim(DeltaTable(merge_log_path(layout)), RECENT - timedelta(minutes=1))


def test_a_log_without_file_stats_is_read_whole_and_cut_to_the_same_window(tmp_path):
    layout = LakeLayout(str(tmp_path))
    DeltaTable.create(merge_log_path(layout), MERGE_LOG_SCHEMA, configuration={"delta.dataSkippingNumIndexedCols": "0"})
    written = many_runs(layout, random.Random(9))
    stats = pa.table(DeltaTable(merge_log_path(layout)).get_add_actions(flatten=True)).column_names
    assert "max.finished_at" not in stats
    for keys in (None, frozenset({1, 2}), frozenset({19})):
        assert last_entries(layout, keys) == recount(written, keys)
    newest = max(e.finished_at for e in written)
    shown, until = recent_entries(layout, ["run_id", "table_key"])
    assert until == newest and sorted(shown.to_pylist(), key=str) == sorted(
        ({"run_id": e.run_id, "table_key": e.table_key} for e in written if e.finished_at >= newest - RECENT), key=str)
