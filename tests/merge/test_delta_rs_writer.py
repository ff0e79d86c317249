"""Small windows applied on the driver with delta-rs (tidelake.merge.writers.delta_rs_writer): the same rows
and the same exactly-once as the Spark path, checked against the upstream replay
(lake_fixtures.FedLake.expected_rows) at every checkpoint, read back by Spark.

tests/merge/test_table_merge.py covers the Spark path (it turns this one off), and a common handle's
PK change inside its collation key on both.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, by_driver, replica_rows
from merge.overtaking_job import merge_overtaken, unleased_runs

from tidelake.failpoints import armed
from tidelake.lake.checkpoint import checkpoint_version, read_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.decimal_stats import STATS_COLUMNS
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]


class Crash(Exception):
    pass


def crash(name: str, owner: object) -> None:
    raise Crash(f"injected at {name}")


def _merged_empty_table(spark, tmp_path, columns: list[tuple]) -> FedLake:
    """A lake with table app.t of `columns`, its replica created by a first merge."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "t", columns))
    lake.resolve()
    run_merge(spark, lake.layout)
    return lake


def last_commit(path: str) -> dict:
    return DeltaTable(path).history(1)[0]


def test_windows_on_the_driver_are_one_commit_each_and_exactly_once(spark, tmp_path, monkeypatch):
    """A new replica is created by delta-rs; all-new keys are one append, a mixed window one MERGE
    (an update, deletes and new keys in both partitions, changes landed twice), a window without
    changes a commit of the checkpoint alone; a crash before a commit leaves replica and
    checkpoint as they were and the rerun converges, a crash after it leaves nothing to redo, and
    a window another job committed after this run planned it writes nothing."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")],
                                  partitions=["p0", "p1"]))
    row = lambda i, note="n": {"id": i, "note": f"{note}{i}"}  # noqa: E731
    path = lambda: ReplicaCatalog(lake.layout).find("shop", "orders").path  # noqa: E731
    created = lake.resolve()
    assert run_merge(spark, lake.layout).tables[0].checkpoint_after == created
    creation = DeltaTable(path()).history()[-1]  # no column name needs column mapping: delta-rs creates it
    assert creation["engineInfo"].startswith("delta-rs") and creation["operation"] == "CREATE TABLE"

    with lake.txn() as t:
        for i in range(1, 7):
            t.put("shop", "orders", row(i))
    with lake.txn() as t:
        t.put("shop", "orders", row(7))
    with lake.txn() as t:
        t.delete("shop", "orders", row(7))  # new and gone: nothing to write
    lake.reland(lake.committed[:3])  # at-least-once landing
    first = lake.resolve()
    version = DeltaTable(path()).version()
    with armed(["merge.before_commit"], crash):
        (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.ERROR and "injected" in result.reason
    assert read_checkpoint(path()) == created and DeltaTable(path()).version() == version
    (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path()) == first
    assert DeltaTable(path()).version() == version + 1  # one commit: the rows and the checkpoint
    commit = last_commit(path())
    assert commit["operation"] == "WRITE" and commit["engineInfo"].startswith("delta-rs")
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", first)
    assert result.rows_out == len(lake.expected_rows("shop", "orders", first))

    with lake.txn() as t:  # mixed: an update, two deletes (one per partition), new keys in both
        t.put("shop", "orders", row(1, "u"))
        t.delete("shop", "orders", row(2))
        t.delete("shop", "orders", row(3))
        t.put("shop", "orders", row(12))
        t.put("shop", "orders", row(21))
    lake.reland(lake.committed[-5:])
    second = lake.resolve()
    with armed(["merge.after_commit"], crash):
        (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.ERROR and read_checkpoint(path()) == second
    version = DeltaTable(path()).version()
    (result,) = run_merge(spark, lake.layout).tables
    assert result.windows == 0 and DeltaTable(path()).version() == version  # nothing left to redo
    assert last_commit(path())["operation"] == "MERGE"
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", second)

    idle = lake.resolve()  # no change: a commit of the checkpoint alone
    # another job commits it after this run planned it: this run's window is skipped by its txn
    result, other = merge_overtaken(spark, lake.layout, idle, monkeypatch)
    assert result.status == other.status == MergeStatus.MERGED and read_checkpoint(path()) == idle
    assert DeltaTable(path()).version() == version + 1 and DeltaTable(path()).history(1)[0]["userMetadata"]
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", idle)
    changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path())
    assert changes.where("_change_type = 'delete'").count() == 2  # the MERGE's change files
    assert changes.where("_change_type = 'update_postimage'").count() == 1
    lake.close()


def test_a_commit_racing_another_job_of_the_same_window_is_retried_and_skipped(spark, tmp_path, monkeypatch):
    """Another job (an abandoned Airflow attempt) commits the same window between this job's read
    of the checkpoint and its commit: delta-rs refuses the commit (the same txn app id), the window
    is retried, finds its checkpoint recorded and writes nothing: the rows are in once."""
    lake = _merged_empty_table(spark, tmp_path, [("id", "bigint", "pk"), ("v", "int")])
    with lake.txn() as t:
        for i in range(1, 4):
            t.put("app", "t", {"id": i, "v": i})
    upper = lake.resolve()
    path = ReplicaCatalog(lake.layout).find("app", "t").path
    real_read, raced = ChangelogSnapshot.last_changes, []

    def read_then_race(snapshot, ids, lo, hi):
        if not raced:
            raced.append(hi)
            monkeypatch.setattr(ChangelogSnapshot, "last_changes", real_read)
            with unleased_runs(monkeypatch):  # the other job, which lost its lease mid-write
                (other,) = run_merge(spark, lake.layout, until_ts=hi, write_log=False).tables
            assert other.rows_in == 3
        return real_read(snapshot, ids, lo, hi)

    monkeypatch.setattr(ChangelogSnapshot, "last_changes", read_then_race)
    version = DeltaTable(path).version()
    (result,) = run_merge(spark, lake.layout).tables
    assert raced == [upper] and result.status == MergeStatus.MERGED and read_checkpoint(path) == upper
    assert DeltaTable(path).version() == version + 1  # the other job's commit only
    lake.close()


def test_a_ddl_removal_that_removes_nothing_still_records_its_checkpoint(spark, tmp_path):
    """TRUNCATE PARTITION of an empty partition: the DDL's last commit removes no row, and delta-rs
    makes no commit for a DELETE that changes nothing. The DDL's txn must still be committed
    (alone), or no replica version records the DDL's ts and, with nothing after it yet, the
    replica stays at the barrier: each run applies the DDL again and moves nothing."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")],
                                  partitions=["p0", "p1"]))
    with lake.txn() as t:
        for i in (1, 3, 5):  # odd ids: partition p1 only
            t.put("shop", "orders", {"id": i, "note": f"n{i}"})
    before = lake.resolve()
    run_merge(spark, lake.layout)
    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    assert read_checkpoint(path) == before
    emptied = lake.up.table("shop", "orders").physical_ids()[0]
    truncated = lake.ddl(lake.up.truncate_partition("shop", "orders", "p0"))
    lake.lander.resolve(emptied, truncated)  # the truncated partition's id is watched up to its DDL
    lake.resolve(truncated)
    for _ in range(2):  # a second run finds nothing left to do
        (result,) = run_merge(spark, lake.layout).tables
        assert read_checkpoint(path) == truncated, result
    assert checkpoint_version(path) == (truncated, DeltaTable(path).version())
    assert by_driver(DeltaTable(path).history(1)[0])
    assert replica_rows(spark, path) == lake.expected_rows("shop", "orders", truncated)
    lake.close()


def _stats_columns_of_last_add(path: str) -> set[str]:
    """The columns the replica's last added file has min/max statistics of, read from its log."""
    stats = [json.loads(a["stats"]) for c in reversed(sorted(Path(path, "_delta_log").glob("*.json")))
             for line in c.read_text().splitlines() if (a := json.loads(line).get("add")) and a.get("stats")]
    return set(stats[0]["minValues"]) if stats else set()


@pytest.mark.parametrize("older", [False, True])
def test_wide_decimals_get_no_file_stats_so_delta_rs_merges_and_a_filtered_read_finds_them(spark, tmp_path, older):
    """deltalake 1.6 writes a decimal's min/max file stats through an int64 or a float, clamped or
    rounded above 15 digits: a Spark `WHERE` that skips files by those stats would miss the row. A
    replica whose wide decimals are not keys collects no stats of them (delta.dataSkippingStatsColumns,
    from its creation or, for a replica made before, from its next merge), so delta-rs merges it,
    and a filtered read by Spark still finds the row."""
    lake = _merged_empty_table(spark, tmp_path, [("id", "bigint", "pk"), ("amount", "decimal(20,2)"),
                                                 ("fx", "decimal(30,10)"), ("note", "varchar(8)")])
    path = ReplicaCatalog(lake.layout).find("app", "t").path
    assert DeltaTable(path).metadata().configuration[STATS_COLUMNS] == "id,note,_tidb_commit_ts"
    if older:  # a replica of a release before the property
        spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('{STATS_COLUMNS}')")
    with lake.txn() as t:
        t.put("app", "t", {"id": 1, "amount": Decimal("123456789012345678.91"), "fx": Decimal("1.5"), "note": "a"})
        t.put("app", "t", {"id": 7, "amount": Decimal("-0.01"), "fx": None, "note": "b"})
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path) == upper
    assert by_driver(last_commit(path))
    assert _stats_columns_of_last_add(path) == {"id", "note", "_tidb_commit_ts"}
    found = spark.read.format("delta").load(path).where("amount = 123456789012345678.91").count()
    assert found == 1
    assert replica_rows(spark, path) == lake.expected_rows("app", "t", upper)

    # Delta refuses a rewrite without a column the property names: the DDL drops the property
    # first, the merge sets it again for the new columns, and delta-rs writes on
    lake.ddl(lake.up.rename_column("app", "t", "note", "memo"))
    lake.ddl(lake.up.drop_column("app", "t", "fx"))
    with lake.txn() as t:
        t.put("app", "t", {"id": 8, "amount": Decimal("99999999999999999.99"), "memo": "c"})
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path) == upper, result
    assert DeltaTable(path).metadata().configuration[STATS_COLUMNS] == "id,memo,_tidb_commit_ts"
    assert by_driver(last_commit(path))
    assert replica_rows(spark, path) == lake.expected_rows("app", "t", upper)
    lake.close()


def test_a_replica_keyed_by_a_wide_decimal_is_merged_by_spark_and_found_by_a_filtered_read(spark, tmp_path):
    """A BIGINT UNSIGNED key (DECIMAL(20,0)) keeps its file stats, which point lookups skip files
    by, so its replica stays on the Spark path."""
    lake = _merged_empty_table(spark, tmp_path, [("id", "bigint unsigned", "pk"), ("amount", "decimal(20,2)")])
    path = ReplicaCatalog(lake.layout).find("app", "t").path
    assert STATS_COLUMNS not in DeltaTable(path).metadata().configuration
    with lake.txn() as t:
        t.put("app", "t", {"id": 2**64 - 1, "amount": Decimal("123456789012345678.91")})
        t.put("app", "t", {"id": 7, "amount": Decimal("-0.01")})
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path) == upper
    assert not by_driver(last_commit(path))
    found = spark.read.format("delta").load(path).where(
        "id = 18446744073709551615 AND amount = 123456789012345678.91").count()
    assert found == 1
    assert replica_rows(spark, path) == lake.expected_rows("app", "t", upper)
    lake.close()
