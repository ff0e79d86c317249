"""SCD2 history windows on the driver with delta-rs (tidelake.merge.scd2_history, its Arrow source
tidelake.merge.writers.history_rows): the same history rows as the Spark path, compared table to
table over the same windows (inserts, a key updated several times in one window, deletes, a delete
then a re-insert, a common handle's PK changing inside its collation key, changes landed twice);
no Spark job for a small window; and the exactly-once of scd2_history's docstring through a crash
between the history's commit and the replica's. A history table with wide decimals gets the
statistics property its replica gets (tidelake.merge.decimal_stats), so the driver writes it too,
and a DDL's step at its ts with few rows is the driver's as well.
"""

from __future__ import annotations

import copy
import inspect
import shutil
from decimal import Decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from merge.lake_fixtures import FedLake, by_driver, sorted_rows

from tidelake.config import HistoryConfig
from tidelake.errors import InputError
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.history_table import HISTORY_APP_ID, history_checkpoint, history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge import scd2_history, table_merge
from tidelake.merge.changelog_reader import Window, read_window
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.decimal_stats import listed_columns
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.merge.replica_schema import delta_struct
from tidelake.merge.scd2_history import write_history
from tidelake.merge.window_spec import history_merge
from tidelake.merge.writers.delta_rs_writer import commit_txn_only
from tidelake.merge.writers.history_rows import KIND_COLUMN, VERSION_COLUMNS, history_rows
from tidelake.merge.writers.spark_writer import run_merge_spec

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

CONFIG = HistoryConfig(scd2=("shop.*",))


class Crash(Exception):
    pass


def history_lake(spark, tmp_path, users: bool = True) -> FedLake:
    """shop.orders (BIGINT PK) and, with `users`, shop.users (a clustered VARCHAR PK: a common
    handle), merged once with [history] on: replicas and empty history tables at the first checkpoint."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    if users:
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


def no_spark(*args, **kwargs):
    raise AssertionError("a small history step ran a Spark job")


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
    lake = history_lake(spark, tmp_path, users=False)
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


def history_on_spark(*args, **kwargs) -> int:
    """write_history without the run's changelog snapshot: the step is Spark's (its other
    arguments, the caller's check included, as given)."""
    bound = inspect.signature(write_history).bind(*args, **kwargs)
    bound.arguments["changelog"] = None
    return write_history(*bound.args, **bound.kwargs)


def wide_decimal_history(spark, root: str, monkeypatch, on_driver: bool) -> tuple[FedLake, str]:
    """shop.prices (a DECIMAL(38,10) and a string besides its BIGINT PK) with a history table:
    created, one window, then (with no Spark for the history when `on_driver`, with Spark for every
    history step otherwise, the replica's windows on the driver in both) a window, an ADD COLUMN
    of another wide decimal and an int with rows at its ts, a window, a TRUNCATE and a window.
    Returns the lake and the history table's path."""
    lake = FedLake(root)
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "prices", [("id", "bigint", "pk"), ("amount", "decimal(38,10)"),
                                                     ("note", "varchar(20)")]))
    lake.resolve()
    merge = lambda: {r.table: r for r in run_merge(spark, lake.layout, history_config=CONFIG).tables}  # noqa: E731
    with monkeypatch.context() as patched:
        if not on_driver:
            patched.setattr(table_merge, "write_history", history_on_spark)
        assert merge()["shop.prices"].status == MergeStatus.MERGED
        history = history_of(lake, "prices")
        if on_driver:
            assert listed_columns(DeltaTable(history).metadata().configuration) == \
                {"id", "note", "_tidb_valid_from", "_tidb_valid_to"}  # from its creation
        with lake.txn() as t:
            for i in (1, 2, 3):
                t.put("shop", "prices", {"id": i, "amount": Decimal(f"{i}23456789012345678901234567.0123456789"),
                                         "note": "a"})
        lake.resolve()
        assert merge()["shop.prices"].status == MergeStatus.MERGED
        if on_driver:
            patched.setattr(scd2_history, "read_window", no_spark)
            patched.setattr(scd2_history, "run_merge_spec", no_spark)
        with lake.txn() as t:
            t.put("shop", "prices", {"id": 1, "amount": Decimal("-999999999999999999999999999.9999999999"),
                                     "note": "b"})
            t.delete("shop", "prices", {"id": 2})
        with lake.txn() as t:
            t.put("shop", "prices", {"id": 1, "amount": Decimal("0.0000000001"), "note": "c"})
        lake.resolve()
        assert merge()["shop.prices"].status == MergeStatus.MERGED
        assert by_driver(DeltaTable(history).history(1)[0]) == on_driver
        old = copy.deepcopy(lake.up.table("shop", "prices"))
        added = lake.ddl(lake.up.add_columns("shop", "prices", [("fx", "decimal(38,4)"), ("qty", "int")]))
        with lake.txn(commit_ts=added) as t:  # async-committed at the DDL's ts, decoded with the schema after it
            t.put("shop", "prices", {"id": 3, "amount": Decimal("1.5"), "note": "at the ddl"}, written_with=old)
            t.put("shop", "prices", {"id": 4, "amount": None, "note": "new at the ddl"}, written_with=old)
        with lake.txn() as t:
            t.put("shop", "prices", {"id": 4, "amount": Decimal("2"), "note": "d",
                                     "fx": Decimal("12345678901234567890123456789012.3456"), "qty": 5})
        lake.resolve()
        result = merge()["shop.prices"]
        assert result.status == MergeStatus.MERGED and result.ddls_applied == 1, result
        if on_driver:
            assert listed_columns(DeltaTable(history).metadata().configuration) == \
                {"id", "note", "qty", "_tidb_valid_from", "_tidb_valid_to"}  # kept after the DDL
        before = lake.up.table("shop", "prices").physical_ids()
        truncated = lake.ddl(lake.up.truncate_table("shop", "prices"))
        for pid in before:  # the puller resolves the retired id up to its truncate
            lake.lander.resolve(pid, truncated)
        with lake.txn() as t:
            t.put("shop", "prices", {"id": 1, "amount": Decimal("7.7"), "note": "e", "fx": None, "qty": 1})
        upper = lake.resolve()
        result = merge()["shop.prices"]
        assert result.status == MergeStatus.MERGED and result.ddls_applied == 1, result
        assert history_checkpoint(history) == upper
        by_engine = {int(c["version"]): by_driver(c) for c in DeltaTable(history).history()}
        at = {ts: next(v for v in sorted(by_engine) if DeltaTable(history, version=v).transaction_version(
            "tidelake-history") == ts) for ts in (added, truncated, upper)}
        assert all(by_engine[v] == on_driver for v in at.values()), (at, by_engine)
    return lake, history


def test_a_history_with_wide_decimals_and_its_ddl_steps_are_written_on_the_driver_as_spark_writes_them(
        spark, tmp_path, monkeypatch):
    by_spark, spark_history = wide_decimal_history(spark, str(tmp_path / "spark"), monkeypatch, on_driver=False)
    lake, history = wide_decimal_history(spark, str(tmp_path / "driver"), monkeypatch, on_driver=True)
    assert rows(history) == rows(spark_history)
    assert {r["note"] for r in rows(history) if r["id"] == 3} == {"a", "at the ddl"}  # a version at the DDL's ts
    by_spark.close()
    lake.close()


def test_a_history_behind_its_windows_start_is_sparks_and_without_spark_a_one_line_error(tmp_path):
    """The driver reads (h, hi] into memory, sized by the caller from the window (lo, hi]: a history
    at h < lo (a run advanced the replica without it) goes to Spark even when the run's snapshot
    is given, and a run without a Spark session says so instead of failing on None."""
    path = str(tmp_path / "history")
    write_deltalake(path, pa.table({"id": pa.array([], pa.int64())}))
    commit_txn_only(DeltaTable(path), path, 5, HISTORY_APP_ID)
    layout = LakeLayout(str(tmp_path / "lake"))
    with pytest.raises(InputError, match=r"history table .* at 5: its step to 20 needs Spark .* no Spark session"):
        write_history(None, layout, path, None, [1], 20, 60, stats=[], stats_from=10,
                      changelog=ChangelogSnapshot(layout))
    assert history_checkpoint(path) == 5  # nothing written


def test_a_window_whose_versions_are_closed_already_commits_its_txn_alone_on_the_driver(spark, tmp_path, monkeypatch):
    """A window of deletes whose history a crashed attempt wrote already, without its txn (a MERGE
    committed, the checkpoint not recorded): the driver's MERGE of its close rows changes no row,
    so delta-rs commits nothing and the step commits the txn alone; the history equals the Spark
    twin's, which applies the window once, and the window is not applied again."""
    lake = history_lake(spark, tmp_path, users=False)
    with lake.txn() as t:
        for i in (1, 2, 3):
            t.put("shop", "orders", {"id": i, "note": "a"})
    held = lake.resolve()
    driver, twin = history_of(lake, "orders"), str(tmp_path / "spark-orders")
    step(None, lake, "orders", driver, held, on_driver=True)
    shutil.copytree(driver, twin)
    with lake.txn() as t:
        t.delete("shop", "orders", {"id": 1, "note": ""})
    with lake.txn() as t:
        t.delete("shop", "orders", {"id": 2, "note": ""})
    hi = lake.resolve()

    history = SchemaHistory.load(lake.layout)
    info = history.table_info_at(history.find("shop", "orders"), hi)
    struct = delta_struct(DeltaTable(driver))
    window = Window(tuple(info.physical_ids()), held, hi)
    crashed = scd2_history.history_source(read_window(spark, lake.layout, window, ChangelogSnapshot(lake.layout)
                                                      .bucket_seconds), info, struct)
    run_merge_spec(spark, driver, crashed, history_merge(info, struct.fieldNames(), KIND_COLUMN, *VERSION_COLUMNS))
    assert history_checkpoint(driver) == held and rows(driver) != rows(twin)  # written, not recorded
    before, version = rows(driver), DeltaTable(driver).version()

    merged, merge_arrow = [], scd2_history.merge_arrow

    def spy(table, source, *args):
        merged.append((source.num_rows, merge_arrow(table, source, *args)))
        return merged[-1][1]

    monkeypatch.setattr(scd2_history, "merge_arrow", spy)
    monkeypatch.setattr(scd2_history, "read_window", no_spark)
    monkeypatch.setattr(scd2_history, "run_merge_spec", no_spark)
    assert step(None, lake, "orders", driver, hi, on_driver=True) == 0
    ((sources, metrics),) = merged
    assert sources == 2 and sum(metrics[f"num_target_rows_{k}"] for k in ("inserted", "updated", "deleted")) == 0
    txn_alone = DeltaTable(driver)
    assert txn_alone.version() == version + 1 and history_checkpoint(driver) == hi
    assert txn_alone.get_add_actions().column("path") == \
        DeltaTable(driver, version=version).get_add_actions().column("path")  # no file added or removed
    assert rows(driver) == before
    assert step(None, lake, "orders", driver, hi, on_driver=True) == 0  # recorded: not applied again
    assert DeltaTable(driver).version() == version + 1
    monkeypatch.undo()

    step(spark, lake, "orders", twin, hi, on_driver=False)
    assert rows(driver) == rows(twin) and history_checkpoint(twin) == hi
    assert {(r["id"], r["_tidb_is_current"]) for r in rows(twin)} == {(1, False), (2, False), (3, True)}
    lake.close()
