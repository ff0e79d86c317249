"""Maintenance: changelog retention below each replica's checkpoint (including a truncated table's
retired physical id), OPTIMIZE compacting a replica's files, VACUUM deleting the compacted ones."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lake.ddl_jobs import DdlFeed, Upstream

from tidelake import tso
from tidelake.capture.landing.app_txn import commit_properties
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.lake.checkpoint import MERGE_APP_ID, read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.errors import EXIT_TRY_LATER
from tidelake.lake.lease import LEASE_METADATA_KEY, LeaseHeld, hold, replica_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.row_change import RowChange
from tidelake.lake.schema_history import SchemaHistory
from tidelake.maintenance.lake_upkeep import (
    LISTING_CONF,
    MAINTENANCE_LEASE,
    VACUUM_LISTING_TASKS,
    changelog_checkpoints,
    run_maintenance,
)
from tidelake.maintenance.replica_upkeep import DELTA_RS, SPARK
from tidelake.maintenance.vacuum_hold import TOMBSTONE_RETENTION, VacuumHold
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries, last_entries, merge_log_path

HOUR = 3_600_000 << 18  # one hour of TSO (one changelog commit bucket)
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _replica_commit(path, ts):
    write_deltalake(path, pa.table({"id": [ts]}, schema=SCHEMA), mode="append",
                    commit_properties=commit_properties(MERGE_APP_ID, ts))


def _change(table_id, ts):
    return RowChange(table_id, ts, ts - 1, "put", b"t" + ts.to_bytes(8, "big"), b"v", b"", 1)


def _parquet_files(path):
    return sorted(p.name for p in Path(path).glob("*.parquet"))


@pytest.mark.spark
@pytest.mark.timeout(1800)  # a handful of Delta commits; slow only on a loaded machine
@pytest.mark.parametrize("engine", [DELTA_RS, SPARK])
def test_retention_optimize_vacuum(spark, tmp_path, engine):
    """The same upkeep on either engine: a replica delta-rs may write is compacted and vacuumed on
    the driver with no Spark job; one with deletion vectors (a reader feature delta-rs does not
    write) by Spark, VACUUM listing with few tasks."""
    layout = LakeLayout(str(tmp_path))
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_table("shop", "a", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    old_id = up.table("shop", "a").id
    start = up.ts
    up.ts += 2 * HOUR
    feed.run(up.truncate_table("shop", "a"))  # retires old_id two buckets later
    new_id = up.table("shop", "a").id
    truncated = up.ts
    DdlWriter(layout, "puller").insert(feed.rows, 1)
    catalog = ReplicaCatalog(layout)
    key = SchemaHistory(feed.rows).tables()[0]
    path = catalog.assign(key, "shop", "a", start).path
    _replica_commit(path, start)
    _replica_commit(path, truncated + HOUR)  # merged one bucket past the truncate
    ChangelogWriter(layout, "puller").append(
        [_change(old_id, start + 1), _change(old_id, start + HOUR), _change(new_id, truncated + 1),
         _change(new_id, truncated + 3 * HOUR), _change(999, start + 1)], 1)

    history = SchemaHistory.load(layout)
    assert changelog_checkpoints(layout, history, catalog) == {old_id: truncated + HOUR, new_id: truncated + HOUR}
    if engine == SPARK:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    files_before = _parquet_files(path)
    assert len(files_before) == 2

    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("maintenance-test", "run_maintenance")
    try:
        report = run_maintenance(spark, layout, vacuum_retention_hours=0)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    stages = [tracker.getStageInfo(s) for j in tracker.getJobIdsForGroup("maintenance-test")
              for s in tracker.getJobInfo(j).stageIds]
    assert report.engines[path] == engine
    if engine == SPARK:  # VACUUM's file listing ran with VACUUM_LISTING_TASKS tasks, not Spark's default 10,000
        assert stages and max(stage.numTasks for stage in stages if stage is not None) <= VACUUM_LISTING_TASKS
    else:
        assert stages == []
    assert spark.conf.get(LISTING_CONF, None) is None  # the session is left as it was
    left = DeltaTable(layout.changelog).to_pyarrow_table(columns=["table_id", "commit_ts"]).to_pylist()
    # whole buckets below the checkpoint's bucket went, for the retired id too; later buckets stay;
    # table 999 has no replica and keeps everything
    assert sorted((r["table_id"], r["commit_ts"]) for r in left) == sorted(
        [(new_id, truncated + 3 * HOUR), (999, start + 1)])
    assert report.changelog_rows_deleted == 3
    assert report.optimized[path] == 2 and path in report.vacuumed and layout.changelog in report.vacuumed
    files_after = _parquet_files(path)
    assert len(files_after) == 1 and not set(files_after) & set(files_before)  # compacted, old ones vacuumed
    assert read_checkpoint(path) == truncated + HOUR  # OPTIMIZE keeps the checkpoint
    (optimized,) = [c for c in DeltaTable(path).history() if c["operation"] == "OPTIMIZE"]
    assert json.loads(optimized["userMetadata"]) == {LEASE_METADATA_KEY: 1}  # made under the replica's lease
    assert sorted(r["id"] for r in spark.read.format("delta").load(path).collect()) == [start, truncated + HOUR]


class Conf(dict):
    def get(self, key, default=None):
        return super().get(key, default)

    def set(self, key, value):
        self[key] = value

    def unset(self, key):
        self.pop(key, None)


class NoSpark:  # no replica to touch: only the conf of the vacuum step is read
    conf = Conf()


def test_changelog_buckets_are_left_to_the_lander_that_compacts_them_and_vacuum_still_runs(tmp_path):
    """Two flushes leave two small files in one bucket: maintenance rewrites neither (a compaction
    here could commit beside the lander's own of the same files), and it vacuums the changelog."""
    layout = LakeLayout(str(tmp_path))
    writer = ChangelogWriter(layout, "puller")
    ts = tso.compose(1_800_000_000_000)
    writer.append([_change(1, ts)], 1)
    writer.append([_change(1, ts + 1)], 2)
    files = DeltaTable(layout.changelog).file_uris()
    assert len(files) == 2
    report = run_maintenance(NoSpark(), layout, changelog_retention=False)
    assert DeltaTable(layout.changelog).file_uris() == files
    assert layout.changelog not in report.optimized and report.vacuumed[0] == layout.changelog


def test_a_replica_another_writer_holds_is_skipped_naming_the_holder(tmp_path):
    layout = LakeLayout(str(tmp_path))
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_table("shop", "a", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    DdlWriter(layout, "puller").insert(feed.rows, 1)
    key = SchemaHistory(feed.rows).tables()[0]
    path = ReplicaCatalog(layout).assign(key, "shop", "a", up.ts).path
    _replica_commit(path, up.ts)
    with hold(layout, {key: (replica_lease(key), "replica of shop.a")}) as merge:
        assert key in merge.held
        report = run_maintenance(NoSpark(), layout, changelog_retention=False)  # NoSpark: no OPTIMIZE or VACUUM
    assert path not in report.optimized and path not in report.vacuumed
    (line,) = report.skipped.values()
    assert line.startswith("replica of shop.a is being written by `") and "token 1 expires in" in line


def test_maintenance_drops_merge_log_entries_past_the_retention_and_keeps_the_latest(tmp_path):
    layout = LakeLayout(str(tmp_path))
    t0 = datetime(2026, 5, 1, tzinfo=timezone.utc)

    def run(hours: float, keys: range) -> list[MergeLogEntry]:
        at = t0 + timedelta(hours=hours)
        return [MergeLogEntry(f"r{hours}", key, f"d.t{key}", MergeStatus.MERGED, None, key, 1, 0, 1, 1, 0.1, None,
                              at, at) for key in keys]

    for hours in range(0, 30, 2):
        append_entries(layout, run(hours, range(3)))
    latest = last_entries(layout, {0, 1, 2})
    report = run_maintenance(NoSpark(), layout, changelog_retention=False, merge_log_retention=timedelta(hours=10))
    kept = DeltaTable(merge_log_path(layout)).to_pyarrow_table(columns=["finished_at"]).column("finished_at")
    assert report.merge_log_rows_deleted == 3 * 9  # runs at hours 0..16 finished more than 10 h before hour 28
    assert min(kept.to_pylist()) == t0 + timedelta(hours=18)
    assert report.optimized[merge_log_path(layout)] > 1
    assert last_entries(layout, {0, 1, 2}) == latest


def test_a_second_maintenance_pass_refuses_at_once_naming_the_first(tmp_path):
    """Two passes at once would each take the replicas the other had not reached: the second
    refuses whole, in one line, and touches nothing."""
    layout = LakeLayout(str(tmp_path))
    ChangelogWriter(layout, "puller").append([_change(1, tso.compose(1_800_000_000_000))], 1)
    landed = DeltaTable(layout.changelog).version()
    with hold(layout, {MAINTENANCE_LEASE: (MAINTENANCE_LEASE, f"maintenance of {layout.root}")}):
        with pytest.raises(LeaseHeld) as refused:
            run_maintenance(NoSpark(), layout, changelog_retention=False)
    assert refused.value.exit_code == EXIT_TRY_LATER and "\n" not in str(refused.value)
    assert str(refused.value).startswith(f"maintenance of {layout.root} is being written by `")
    assert DeltaTable(layout.changelog).version() == landed  # neither compacted nor vacuumed
    report = run_maintenance(NoSpark(), layout, changelog_retention=False)  # released: the next pass runs
    assert report.vacuumed[0] == layout.changelog


def test_a_hold_older_than_the_tables_tombstones_leaves_the_replica_unvacuumed_in_one_line(tmp_path):
    """Past delta.deletedFileRetentionDuration the log forgets the removes, so no retention keeps
    the held version's files: the replica is not vacuumed (NoSpark: a VACUUM would fail)."""
    layout = LakeLayout(str(tmp_path))
    path = ReplicaCatalog(layout).assign(1, "shop", "a", 1).path
    write_deltalake(path, pa.table({"id": [1]}, schema=SCHEMA), commit_properties=commit_properties(MERGE_APP_ID, 1),
                    configuration={TOMBSTONE_RETENTION: "interval 1 hours"})
    write_deltalake(path, pa.table({"id": [2]}, schema=SCHEMA), mode="overwrite")  # removes version 0's file
    hold = VacuumHold(0, "Iceberg snapshot 7 (syncpoint-1) of shop.a")
    report = run_maintenance(NoSpark(), layout, optimize=False, changelog_retention=False, merge_log=False,
                             vacuum_holds={path: hold})
    assert path not in report.vacuumed
    assert report.held[path].startswith("replica of shop.a not vacuumed: Iceberg snapshot 7 (syncpoint-1) of shop.a "
                                        "shows Delta version 0, whose files need 1.0 hours of removed files kept, "
                                        "longer than the table keeps them (delta.deletedFileRetentionDuration "
                                        "interval 1 hours)")
    (line,) = report.held.values()
    assert "\n" not in line
