"""SCD2 history windows on the driver with delta-rs (tidelake.merge.scd2_history, its Arrow source
tidelake.merge.writers.history_rows): the same history rows as the Spark path, compared table to
table over the same windows (inserts, a key updated several times in one window, deletes, a delete
then a re-insert, a common handle's PK changing inside its collation key, changes landed twice);
no Spark job for a small window; and the exactly-once of scd2_history's docstring through a crash
between the history's commit and the replica's.
"""

from __future__ import annotations

import shutil

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, by_driver, sorted_rows

from tidelake.config import HistoryConfig
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.history_table import history_checkpoint, history_path
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge import scd2_history
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.merge.replica_schema import delta_struct
from tidelake.merge.scd2_history import write_history
from tidelake.merge.writers.history_rows import history_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CONFIG = HistoryConfig(scd2=("shop.*",))


class Crash(Exception):
    pass


def history_lake(spark, tmp_path) -> FedLake:
    """shop.orders (BIGINT PK) and shop.users (a clustered VARCHAR PK: a common handle), merged
    once with [history] on: replicas and empty history tables at the first checkpoint."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.ddl(lake.up.create_table("shop", "users", [("name", "varchar(20)", "pk"), ("n", "int")]))
    lake.resolve()
    assert all(r.status == MergeStatus.MERGED for r in run_merge(spark, lake.layout, history_config=CONFIG).tables)
    return lake


def history_of(lake: FedLake, table: str) -> str:
    return history_path(lake.layout, ReplicaCatalog(lake.layout).find("shop", table).path)


def rows(path: str) -> list[dict]:
    return sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist())


def step(spark, lake: FedLake, table: str, path: str, hi: int, on_driver: bool) -> int:
    """One history window up to `hi` of shop.`table` into the history table at `path`."""
    history = SchemaHistory.load(lake.layout)
    info = history.table_info_at(history.find("shop", table), hi)
    changelog = ChangelogSnapshot(lake.layout)
    return write_history(spark, lake.layout, path, info, info.physical_ids(), hi, changelog.bucket_seconds,
                         changelog=changelog if on_driver else None)


def test_driver_and_spark_write_the_same_history_and_a_step_twice_changes_nothing(spark, tmp_path):
    lake = history_lake(spark, tmp_path)
    o = lambda i, note: {"id": i, "note": note}  # noqa: E731
    u = lambda name, n: {"name": name, "n": n}  # noqa: E731
    with lake.txn() as t:  # rows held before the compared window
        for i in (1, 2, 3, 4):
            t.put("shop", "orders", o(i, "a"))
        t.put("shop", "users", u("ab", 1))
        t.put("shop", "users", u("cd", 1))
    held = lake.resolve()
    twins = {}
    for table in ("orders", "users"):
        driver = history_of(lake, table)
        step(None, lake, table, driver, held, on_driver=True)
        twins[table] = (driver, str(tmp_path / f"spark-{table}"))
        shutil.copytree(driver, twins[table][1])

    # one window: held keys updated (one several times), deleted, deleted then re-inserted; a new
    # key updated, one inserted and deleted; a common handle's PK changed inside its collation key
    # twice, another deleted then back; a part of it landed twice
    with lake.txn() as t:
        t.put("shop", "orders", o(1, "b"))
        t.delete("shop", "orders", o(2, ""))
        t.put("shop", "orders", o(5, "new"))
        t.put("shop", "users", u("ab ", 2))  # the same raw key: utf8mb4_bin ignores trailing spaces
        t.delete("shop", "users", u("cd", 1))
    with lake.txn() as t:
        t.put("shop", "orders", o(1, "c"))
        t.put("shop", "orders", o(2, "again"))
        t.put("shop", "orders", o(5, "newer"))
        t.delete("shop", "orders", o(3, ""))
        t.put("shop", "orders", o(6, "gone"))
    with lake.txn() as t:
        t.put("shop", "orders", o(1, "d"))
        t.delete("shop", "orders", o(6, ""))
        t.put("shop", "users", u("ab  ", 3))
        t.put("shop", "users", u("cd", 9))
    lake.reland(lake.committed[-8:])
    hi = lake.resolve()

    for table, (driver, by_spark) in twins.items():
        versions = step(None, lake, table, driver, hi, on_driver=True)  # no Spark session at all
        assert versions == step(spark, lake, table, by_spark, hi, on_driver=False) > 0
        assert by_driver(DeltaTable(driver).history(1)[0]) and not by_driver(DeltaTable(by_spark).history(1)[0])
        assert history_checkpoint(driver) == history_checkpoint(by_spark) == hi
        assert rows(driver) == rows(by_spark), f"{table} history"
    orders = rows(twins["orders"][0])
    assert [(r["note"], r["_tidb_is_current"]) for r in orders if r["id"] == 1] == \
        [("a", False), ("b", False), ("c", False), ("d", True)]  # every commit a version
    assert len([r for r in rows(twins["users"][0]) if r["_tidb_is_current"]]) == 2

    driver = twins["orders"][0]
    version, before = DeltaTable(driver).version(), rows(driver)
    assert step(None, lake, "orders", driver, hi, on_driver=True) == 0  # done already: nothing written
    assert DeltaTable(driver).version() == version
    # its MERGE applied again (as after a crash that lost only the replica's commit) matches what it wrote
    history = SchemaHistory.load(lake.layout)
    info = history.table_info_at(history.find("shop", "orders"), hi)
    struct = delta_struct(DeltaTable(driver))
    source = history_rows(ChangelogSnapshot(lake.layout).key_changes(info.physical_ids(), held, hi), info, struct)
    scd2_history._commit(None, driver, source, info, struct, hi, DeltaTable(driver))
    assert rows(driver) == before
    lake.close()


def test_a_small_window_runs_no_spark_for_its_history_and_a_crash_between_the_commits_loses_nothing(
        spark, tmp_path, monkeypatch):
    lake = history_lake(spark, tmp_path)
    replica = ReplicaCatalog(lake.layout).find("shop", "orders").path
    history = history_path(lake.layout, replica)
    twin = str(tmp_path / "spark-orders")
    shutil.copytree(history, twin)
    start = read_checkpoint(replica)
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "note": "a"})
        t.put("shop", "orders", {"id": 2, "note": "a"})
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "note": "b"})
        t.delete("shop", "orders", {"id": 2, "note": ""})
    hi = lake.resolve()

    def no_spark(*args, **kwargs):
        raise AssertionError("a small history window ran a Spark job")

    def crash(name: str, owner: object) -> None:
        if owner == replica:  # after the history's commit, before the replica's
            raise Crash(f"injected at {name}")

    monkeypatch.setattr(scd2_history, "read_window", no_spark)
    monkeypatch.setattr(scd2_history, "run_merge_spec", no_spark)
    with armed(["merge.before_commit"], crash):
        results = {r.table: r for r in run_merge(spark, lake.layout, history_config=CONFIG).tables}
    assert results["shop.orders"].status == MergeStatus.ERROR and "injected" in results["shop.orders"].reason
    assert history_checkpoint(history) == hi and read_checkpoint(replica) == start
    assert by_driver(DeltaTable(history).history(1)[0])
    version = DeltaTable(history).version()
    results = {r.table: r for r in run_merge(spark, lake.layout, history_config=CONFIG).tables}
    assert results["shop.orders"].status == MergeStatus.MERGED and read_checkpoint(replica) == hi
    assert DeltaTable(history).version() == version  # the history's step was not applied again
    monkeypatch.undo()
    step(spark, lake, "orders", twin, hi, on_driver=False)
    assert rows(history) == rows(twin)
    lake.close()
