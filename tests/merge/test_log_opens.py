"""How often one merge window opens a Delta log: delta-rs table constructions, reads of a log's
commit files (tidelake.lake.delta_commits.DeltaLog, as read_checkpoint walks them) and Spark
statements or reads naming a Delta path, counted while a window is written (TableMerge._window),
by table.
A window opens no log on the driver: the run's handle of the replica is brought up to date (a log
listing, tests/merge/test_run_opens.py) and the changelog is read from the run's snapshot; Spark
reads the changelog once and opens the replica once when Spark writes the window. A history table's
log is opened once per window on the driver, by its step (scd2_history.write_history), whose read
of the history's checkpoint is also the one the window's check of a history behind it is given."""

from __future__ import annotations

import re
import threading
from collections import Counter

import deltalake
import pytest
from merge.lake_fixtures import FedLake
from pyspark.sql import DataFrameReader, SparkSession

from tidelake.config import HistoryConfig
from tidelake.lake.delta_commits import DeltaLog
from tidelake.merge import table_merge
from tidelake.merge.merge_run import run_merge
from tidelake.merge.table_merge import TableMerge

pytestmark = pytest.mark.spark
WINDOWS = 4


def kind(path: object) -> str:
    path = str(path)
    if "_tidelake/changelog" in path:
        return "changelog"
    if "_tidelake/history/" in path:
        return "history"
    return "control" if "_tidelake/" in path else "replica"


@pytest.fixture
def opens(monkeypatch):
    """Log opens while a window is written, by (engine, table kind), in the window's own thread (a
    thread an earlier test left running may open a changelog meanwhile)."""
    counts, inside = Counter(), threading.local()
    real_window, real_init, real_log = TableMerge._window, deltalake.DeltaTable.__init__, DeltaLog.__init__
    real_sql, real_load = SparkSession.sql, DataFrameReader.load

    def window(self, *args, **kwargs):
        inside.active = True
        try:
            return real_window(self, *args, **kwargs)
        finally:
            inside.active = False

    def init(self, table_uri, *args, **kwargs):
        if getattr(inside, "active", False):
            counts["delta-rs", kind(table_uri)] += 1
        return real_init(self, table_uri, *args, **kwargs)

    def log(self, path, *args, **kwargs):
        if getattr(inside, "active", False):
            counts["commit files", kind(path)] += 1
        return real_log(self, path, *args, **kwargs)

    def sql(self, query, *args, **kwargs):
        if getattr(inside, "active", False):
            counts.update(("spark", kind(m)) for m in re.findall(r"delta\.`([^`]+)`", query))
        return real_sql(self, query, *args, **kwargs)

    def load(self, path=None, *args, **kwargs):
        if getattr(inside, "active", False):
            counts["spark", kind(path)] += 1
        return real_load(self, path, *args, **kwargs)

    monkeypatch.setattr(TableMerge, "_window", window)
    monkeypatch.setattr(deltalake.DeltaTable, "__init__", init)
    monkeypatch.setattr(DeltaLog, "__init__", log)
    monkeypatch.setattr(SparkSession, "sql", sql)
    monkeypatch.setattr(DataFrameReader, "load", load)
    return counts


def merged_windows(spark, tmp_path, opens: Counter, history: HistoryConfig | None = None) -> int:
    """About WINDOWS windows of one table (chunks of one run), every key updated in each: MERGEs;
    the number merged. `history`: with a history table from the first run on."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "t", [("id", "bigint", "pk"), ("v", "int")]))
    lake.resolve()
    run_merge(spark, lake.layout, write_log=False, history_config=history)
    for w in range(WINDOWS):
        with lake.txn() as t:
            for i in range(10):
                t.put("app", "t", {"id": i, "v": w})
        lake.resolve()
    opens.clear()  # the replica's creation above is no window of this run
    (result,) = run_merge(spark, lake.layout, max_chunk_rows=10, write_log=False, history_config=history).tables
    lake.close()
    return result.windows


def test_a_delta_rs_window_opens_no_log(spark, tmp_path, opens):
    windows = merged_windows(spark, tmp_path, opens)
    assert windows >= 2 and opens == {}


def test_a_spark_window_opens_the_replica_once_and_spark_reads_the_changelog_once(spark, tmp_path, opens,
                                                                                   monkeypatch):
    monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)
    windows = merged_windows(spark, tmp_path, opens)
    assert windows >= 2
    assert opens == {("spark", "changelog"): windows, ("spark", "replica"): windows}


def test_a_delta_rs_window_with_a_history_table_opens_the_historys_log_once(spark, tmp_path, opens):
    windows = merged_windows(spark, tmp_path, opens, HistoryConfig(scd2=("app.*",)))
    assert windows >= 2 and opens == {("delta-rs", "history"): windows}
