"""The per-table merge (tidelake.merge.table_merge) through run_merge, every window on the Spark
writer, against a lake fed through the real lander; replicas checked against the upstream replay
(lake_fixtures.FedLake.expected_rows), never against typed rows.

Spark is slow on the shared machine: each test walks one scenario end to end and reads the
replica only where an invariant is at stake.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, by_driver, by_rewrite, replica_rows, sorted_rows
from merge.overtaking_job import merge_overtaken
from prometheus_client.parser import text_string_to_metric_families

from tests.capture.pull_harness import sim  # noqa: F401 (fixture of the end-to-end test)
from tidelake import tso
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import read_watermarks
from tidelake.merge.decimal_stats import STATS_COLUMNS
from tidelake.merge.merge_log import MergeStatus, last_entries
from tidelake.merge.merge_metrics import merge_metrics_path
from tidelake.merge.merge_run import run_merge
from tidelake.merge.table_merge import DRIVER_WINDOW_MAX_ROWS

# Spark on the shared 2-core machine: a MERGE can take minutes under load.
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


@pytest.fixture(autouse=True)
def spark_windows(monkeypatch):
    """Every window through Spark: these tests cover that path (and patch its steps); small
    windows on the driver are tests/merge/test_delta_rs_writer.py's."""
    from tidelake.merge import table_merge

    monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)


class Crash(Exception):
    pass


def merge_crashing_in(step: str, spark, layout, monkeypatch):
    """One run_merge of a single table whose Spark writer's SQL statement `step` (INSERT, MERGE)
    raises; the real statement runs again after."""
    real = type(spark).sql

    def crash(self, query, *args, **kwargs):
        if query.startswith(step):
            raise Crash(f"injected in {step}")
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(type(spark), "sql", crash)
    try:
        (result,) = run_merge(spark, layout).tables
    finally:
        monkeypatch.setattr(type(spark), "sql", real)
    assert result.status == MergeStatus.ERROR and f"injected in {step}" in result.reason
    return result


def data_files(spark, path: str) -> int:
    return spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"]


def test_dml_sequences_crash_between_chunks_rerun_and_empty_window(any_spark, tmp_path, monkeypatch):
    """Local Spark and a Spark Connect client alike (the warm Spark of docs/operations.md#warm-spark)."""
    spark = any_spark
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)"),
                                                      ("amount", "decimal(10,2)")]))
    first = [{"id": i, "note": f"n{i}", "amount": Decimal(f"{i}.50")} for i in range(1, 7)]
    for row in first[:3]:
        with lake.txn() as t:
            t.put("shop", "orders", row)
    with lake.txn() as t:  # one txn: several keys
        for row in first[3:]:
            t.put("shop", "orders", row)
    with lake.txn() as t:  # update then a delete
        t.put("shop", "orders", {**first[0], "note": "updated"})
        t.delete("shop", "orders", first[1])
    with lake.txn() as t:  # PK change: TiKV sends delete(old key) + put(new key) at one commit ts
        t.delete("shop", "orders", first[2])
        t.put("shop", "orders", {**first[2], "id": 30})
    with lake.txn() as t:  # deleted and re-inserted in later txns
        t.delete("shop", "orders", first[3])
    with lake.txn() as t:
        t.put("shop", "orders", {**first[3], "note": "back"})
    lake.reland(lake.committed[2:9])  # at-least-once landing: duplicates of (key, commit ts)
    upper = lake.resolve()
    path = lambda: ReplicaCatalog(lake.layout).get(SchemaHistory.load(lake.layout).find("shop", "orders")).path  # noqa: E731

    def crash_after_first_window(event):
        if event.kind == "window":
            raise Crash("injected after the first chunk committed")

    report = run_merge(spark, lake.layout, max_chunk_rows=5, progress=crash_after_first_window)
    (result,) = report.tables
    assert result.status == MergeStatus.ERROR and "injected" in result.reason and result.windows == 1
    mid = read_checkpoint(path())
    assert result.checkpoint_after == mid and mid < upper
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", mid)  # consistent as of mid

    report = run_merge(spark, lake.layout, max_chunk_rows=5)
    (result,) = report.tables
    assert result.status == MergeStatus.MERGED and result.windows >= 1 and result.checkpoint_after == upper
    assert read_checkpoint(path()) == upper
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", upper)
    logged = last_entries(lake.layout)[result.table_key]
    assert logged.checkpoint_after == upper
    assert logged.replica.checkpoint == upper  # the facts status shows: read after Spark's commit, not before it
    prom = {(s.name, s.labels.get("table")): s.value  # the run rewrote the merge metrics file
            for f in text_string_to_metric_families(Path(merge_metrics_path(lake.layout)).read_text())
            for s in f.samples}
    assert prom[("tidelake_merge_rows_applied", result.table)] == result.rows_out
    assert prom[("tidelake_merge_checkpoint_time_seconds", result.table)] == tso.physical_ms(upper) / 1000

    versions = DeltaTable(path()).version()
    report = run_merge(spark, lake.layout)  # nothing new: no commit at all
    assert DeltaTable(path()).version() == versions and report.tables[0].windows == 0

    later = lake.resolve()  # an empty window still moves the checkpoint, adding no data file
    files = data_files(spark, path())
    # another job (a concurrent rerun) commits the window after this run planned it: skipped by its txn
    result, other = merge_overtaken(spark, lake.layout, later, monkeypatch)
    assert other.checkpoint_after == result.checkpoint_after == later == read_checkpoint(path())
    assert data_files(spark, path()) == files and DeltaTable(path()).version() == versions + 1
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", later)
    lake.close()


def test_a_window_of_new_keys_is_one_insert_recording_its_checkpoint_exactly_once(spark, tmp_path, monkeypatch):
    """A key whose first change in the window has no old value held no row at lo: a window of only
    such keys is ONE commit, an INSERT of their last puts that records the checkpoint (so there is
    no point between an append and a MERGE to crash at); any other window is one MERGE. Covered:
    keys re-landed twice, inserted-deleted-inserted, inserted then deleted (nothing to write), a
    row moving to another partition (a new key there), a crash in the INSERT followed by a longer
    rerun, an INSERT another job made first (skipped by its txn), and another job's part of an
    all-new window. Every checkpoint is compared with the upstream replay."""

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")],
                                  partitions=["p0", "p1"]))
    row = lambda i, note="n": {"id": i, "note": f"{note}{i}"}  # noqa: E731
    path = lambda: ReplicaCatalog(lake.layout).get(SchemaHistory.load(lake.layout).find("shop", "orders")).path  # noqa: E731
    with lake.txn() as t:
        for i in range(1, 7):
            t.put("shop", "orders", row(i))
    with lake.txn() as t:
        t.put("shop", "orders", row(7))
    with lake.txn() as t:
        t.delete("shop", "orders", row(7))
        t.put("shop", "orders", row(8))
    with lake.txn() as t:
        t.put("shop", "orders", row(7, "again"))  # inserted, deleted and inserted again: new at lo
        t.delete("shop", "orders", row(8))  # new and gone: nothing to write
    lake.reland(lake.committed[:4])  # at-least-once landing: the same inserts twice
    crashed = lake.resolve()
    merge_crashing_in("INSERT INTO", spark, lake.layout, monkeypatch)
    created = read_checkpoint(path())
    assert created < crashed and replica_rows(spark, path()) == lake.expected_rows("shop", "orders", created) == []
    with lake.txn() as t:  # the rerun's window is longer than the crashed one, still all new keys
        t.put("shop", "orders", row(9))
    first = lake.resolve()
    version = DeltaTable(path()).version()
    # another job inserts the same window after this run planned it: this run's INSERT is skipped
    result, other = merge_overtaken(spark, lake.layout, first, monkeypatch)
    assert result.status == other.status == MergeStatus.MERGED and read_checkpoint(path()) == first
    assert DeltaTable(path()).version() == version + 1  # one commit holds the rows and the checkpoint
    assert DeltaTable(path()).history(1)[0]["operation"] == "WRITE"
    assert other.rows_out == len(lake.expected_rows("shop", "orders", first))
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", first)

    # Another job merged part of an all-new window first ((first, mid]: an abandoned attempt that
    # still ran): this job's window (first, later] must not append (first, mid]'s keys again.
    with lake.txn() as t:
        t.put("shop", "orders", row(20))
    mid = lake.resolve()
    with lake.txn() as t:
        t.put("shop", "orders", row(21))
    later = lake.resolve()
    result, other = merge_overtaken(spark, lake.layout, mid, monkeypatch)
    assert other.rows_in == 1 and other.checkpoint_after == mid
    assert result.checkpoint_after == read_checkpoint(path()) == later
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", later)
    version = DeltaTable(path()).version() - 1

    with lake.txn() as t:  # mixed: a PK change into the other partition (a delete there, a new key here)
        t.delete("shop", "orders", row(2))
        t.put("shop", "orders", row(11, "moved"))
    with lake.txn() as t:
        t.put("shop", "orders", row(3, "u"))
        t.put("shop", "orders", row(10))
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path()) == upper
    assert DeltaTable(path()).version() == version + 2 and DeltaTable(path()).history(1)[0]["operation"] == "MERGE"
    assert replica_rows(spark, path()) == lake.expected_rows("shop", "orders", upper)
    lake.close()


def test_one_pass_reads_the_run_once_and_a_crash_in_the_combined_run_stays_exactly_once(spark, tmp_path, monkeypatch):
    """A run over several tables reads, collapses and classifies their windows in one changelog
    read (tidelake.merge.run_pass), and each table still commits its own window with its own txn:
    one table failing in the combined run leaves it at its checkpoint and the others merged, and
    the rerun converges. Replicas are compared with the upstream replay at each checkpoint."""
    from tidelake.merge import run_pass
    from tidelake.merge.writers import spark_writer

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "a", [("id", "bigint", "pk"), ("v", "varchar(8)")]))
    lake.ddl(lake.up.create_table("app", "b", [("id", "bigint", "pk"), ("v", "varchar(8)")], partitions=["p0", "p1"]))
    lake.ddl(lake.up.create_table("app", "c", [("id", "bigint", "pk"), ("v", "varchar(8)")]))
    row = lambda i, v="x": {"id": i, "v": f"{v}{i}"}  # noqa: E731
    with lake.txn() as t:
        for name in "abc":
            for i in range(1, 5):
                t.put("app", name, row(i))
    lo = lake.resolve()
    assert {r.checkpoint_after for r in run_merge(spark, lake.layout).tables} == {lo}
    with lake.txn() as t:
        t.put("app", "a", row(5))  # a: new keys only
        t.put("app", "b", row(1, "u"))  # b: an update, a delete, a PK change across partitions, a new key
        t.delete("app", "b", row(2))
        t.delete("app", "b", row(3))
        t.put("app", "b", row(8, "m"))
        t.put("app", "b", row(9))
        t.put("app", "c", row(4, "u"))  # c: an update
    lake.reland(lake.committed[-7:])  # the whole txn landed twice
    hi = lake.resolve()
    reads = {"windows": 0, "changes": 0}
    real_windows, real_changes, real_merge = run_pass.read_windows, spark_writer.read_window, spark_writer.run_merge_spec
    c_path = ReplicaCatalog(lake.layout).find("app", "c").path

    def count(kind, real):
        def counted(*args, **kwargs):
            reads[kind] += 1
            return real(*args, **kwargs)
        return counted

    def crash_c(spark_, path_, *args):
        if path_ == c_path:
            raise Crash("injected in c's MERGE")
        real_merge(spark_, path_, *args)

    monkeypatch.setattr(run_pass, "read_windows", count("windows", real_windows))
    monkeypatch.setattr(spark_writer, "read_window", count("changes", real_changes))
    monkeypatch.setattr(spark_writer, "run_merge_spec", crash_c)
    results = {r.table: r for r in run_merge(spark, lake.layout).tables}
    assert reads == {"windows": 1, "changes": 0}
    assert results["app.c"].status == MergeStatus.ERROR and "injected" in results["app.c"].reason
    assert results["app.a"].status == results["app.b"].status == MergeStatus.MERGED
    for name in "abc":
        path = ReplicaCatalog(lake.layout).find("app", name).path
        at = hi if name != "c" else lo
        assert read_checkpoint(path) == at
        assert replica_rows(spark, path) == lake.expected_rows("app", name, at)
    assert not [t for t in spark.catalog.listTables("global_temp") if t.name.startswith("tidelake_pass_")]  # dropped

    monkeypatch.setattr(spark_writer, "run_merge_spec", real_merge)
    (result,) = [r for r in run_merge(spark, lake.layout).tables if r.windows]
    assert result.table == "app.c" and read_checkpoint(c_path) == hi
    assert replica_rows(spark, c_path) == lake.expected_rows("app", "c", hi)
    assert reads == {"windows": 1, "changes": 1}  # one window left: no pass, its own read
    lake.close()


@pytest.mark.parametrize("window_path", ["spark", "driver"])
def test_a_pk_change_inside_its_collation_key_updates_the_row_it_had(spark, tmp_path, monkeypatch, window_path):
    """A clustered VARCHAR PK keeps the collation key in the handle (utf8mb4_bin trims trailing
    spaces; _ci collations fold case), so 'ab' -> 'ab  ' is one put on the same raw key while the
    replica holds the original string. The MERGE must find the row by its value before the window
    (the first change's old value): matching the new string inserts a second row, and matching a
    delete's own old value, written inside the window, misses the row the replica has. Through
    Spark and on the driver (tidelake.merge.writers.delta_rs_writer) alike."""
    from tidelake.merge import table_merge

    if window_path == "driver":
        monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", DRIVER_WINDOW_MAX_ROWS)
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("crm"))
    lake.ddl(lake.up.create_table("crm", "users", [("name", "varchar(20)", "pk"), ("n", "int")]))
    with lake.txn() as t:
        t.put("crm", "users", {"name": "ab", "n": 1})
        t.put("crm", "users", {"name": "cd", "n": 1})
    lake.resolve()
    assert run_merge(spark, lake.layout, write_log=False).tables[0].status == MergeStatus.MERGED
    with lake.txn() as t:
        t.put("crm", "users", {"name": "ab ", "n": 2})
        t.put("crm", "users", {"name": "cd ", "n": 2})
    with lake.txn() as t:
        t.put("crm", "users", {"name": "ab  ", "n": 3})
        t.delete("crm", "users", {"name": "cd ", "n": 2})
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout, write_log=False).tables
    assert result.status == MergeStatus.MERGED and result.checkpoint_after == upper
    path = ReplicaCatalog(lake.layout).get(result.table_key).path
    last = DeltaTable(path).history(1)[0]
    assert by_driver(last) == by_rewrite(last) == (window_path == "driver")  # on the driver: the rewrite
    assert replica_rows(spark, path) == lake.expected_rows("crm", "users", upper)
    lake.close()


def test_a_wide_decimal_replica_is_merged_by_spark_at_the_extremes_of_its_precision(spark, tmp_path, monkeypatch):
    """A DECIMAL(38,10) replica (no file stats of the decimal: tidelake.merge.decimal_stats) holding
    the largest and smallest values of the type, both signs, zero and NULL (a first window, left
    on the driver to keep the test cheap), then one Spark MERGE moving each to another, deleting
    one and inserting one: the replica, read back by delta-rs, holds the literal values and
    equals the upstream replay at the checkpoint."""
    from tidelake.merge import table_merge

    top, tick = Decimal("9999999999999999999999999999.9999999999"), Decimal("0.0000000001")
    low, minus_tick = top.copy_negate(), tick.copy_negate()  # `-top` rounds to the context's 28 digits
    amounts = {1: top, 2: low, 3: tick, 4: minus_tick, 5: Decimal(0), 6: None}
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "prices", [("id", "bigint", "pk"), ("amount", "decimal(38,10)")]))
    with lake.txn() as t:
        for i, amount in amounts.items():
            t.put("shop", "prices", {"id": i, "amount": amount})
    first = lake.resolve()
    with monkeypatch.context() as driver:
        driver.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", DRIVER_WINDOW_MAX_ROWS)
        (result,) = run_merge(spark, lake.layout, write_log=False).tables
    path = ReplicaCatalog(lake.layout).get(result.table_key).path
    assert result.status == MergeStatus.MERGED and read_checkpoint(path) == first
    assert DeltaTable(path).metadata().configuration[STATS_COLUMNS] == "id,_tidb_commit_ts"

    moved = {1: low, 2: None, 3: top, 4: Decimal(0), 6: minus_tick, 7: tick}  # 5 deleted, 7 new
    with lake.txn() as t:
        t.delete("shop", "prices", {"id": 5, "amount": amounts[5]})
        for i, amount in moved.items():
            t.put("shop", "prices", {"id": i, "amount": amount})
    upper = lake.resolve()
    (result,) = run_merge(spark, lake.layout, write_log=False).tables
    assert result.status == MergeStatus.MERGED and read_checkpoint(path) == upper
    last = DeltaTable(path).history(1)[0]
    assert last["operation"] == "MERGE" and not by_driver(last)
    replica = sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist())
    assert {r["id"]: r["amount"] for r in replica} == moved
    assert replica == lake.expected_rows("shop", "prices", upper)
    lake.close()


def test_partitioned_rowid_table_across_a_ddl_and_a_stopped_table(any_spark, tmp_path):
    spark = any_spark
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("app"))
    lake.ddl(lake.up.create_table("app", "events", [("id", "int"), ("kind", "varchar(8)")], partitions=["p0", "p1"]))
    rid = {i: next(lake.rowids) for i in range(1, 5)}
    with lake.txn() as t:
        for i in range(1, 5):
            t.put("app", "events", {"id": i, "kind": "a"}, rowid=rid[i])
    with lake.txn() as t:  # a row moves partition: delete in one physical id, put in the other
        t.delete("app", "events", {"id": 1, "kind": "a"}, rowid=rid[1])
        t.put("app", "events", {"id": 2, "kind": "moved"}, rowid=rid[1])
    lake.ddl(lake.up.add_index("app", "events"))  # no barrier: the replica does not change
    with lake.txn() as t:
        t.put("app", "events", {"id": 3, "kind": "c"}, rowid=rid[3])
    lake.ddl(lake.up.set_comment("app", "events", "one window across both"))
    lake.ddl(lake.up.add_column("app", "events", ("score", "int", {"default": "7"})))
    with lake.txn() as t:
        t.put("app", "events", {"id": 4, "kind": "b", "score": 1}, rowid=rid[4])
        t.delete("app", "events", {"id": 3, "kind": "c"}, rowid=rid[3])
    upper = lake.resolve()
    assert read_watermarks(lake.layout).ddl_resolved == upper

    report = run_merge(spark, lake.layout, tables=["app.events"])
    (result,) = report.tables
    # CREATE and ADD COLUMN are barriers; ADD INDEX and the comment ride inside the first window
    assert result.status == MergeStatus.MERGED and result.ddls_applied == 2 and result.windows == 2
    path = ReplicaCatalog(lake.layout).get(result.table_key).path
    assert read_checkpoint(path) == upper
    assert replica_rows(spark, path) == lake.expected_rows("app", "events", upper)

    with pytest.raises(Exception, match="not in the DDL history"):
        run_merge(spark, lake.layout, tables=["app.nope"])
    lake.close()


def test_an_unsupported_ddl_stops_only_its_table(spark, tmp_path, monkeypatch):
    from tidelake.merge import table_merge
    from tidelake.merge.ddl_apply import UnsupportedDDL

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("s"))
    lake.ddl(lake.up.create_table("s", "a", [("id", "bigint", "pk")]))
    lake.ddl(lake.up.create_table("s", "b", [("id", "bigint", "pk")]))
    lake.ddl(lake.up.add_column("s", "a", ("x", "int")))
    lake.resolve()
    real = table_merge.apply_ddl

    def refuse_add_column(spark_, layout, table, event, *rest):
        if event.query and "ADD COLUMN" in event.query.upper():
            raise UnsupportedDDL(f"refused {event.query}")
        return real(spark_, layout, table, event, *rest)

    monkeypatch.setattr(table_merge, "apply_ddl", refuse_add_column)
    report = run_merge(spark, lake.layout, write_log=False)
    status = {r.table: r.status for r in report.tables}
    assert status == {"s.a": MergeStatus.STOPPED, "s.b": MergeStatus.MERGED}
    assert "refused" in ReplicaCatalog(lake.layout).get(report.tables[0].table_key).reason
    lake.close()


@pytest.mark.slow
def test_end_to_end_from_the_simulator_equals_a_snapshot_read_at_the_checkpoint(spark, sim, tmp_path, monkeypatch):
    """SimTiDB writes, the real puller lands, merge advances; the replica must equal SimTiDB's own
    snapshot read at the replica's checkpoint (invariant 6), across an ADD COLUMN, a PK change, keys
    deleted and inserted again, and index DDLs that are no barrier. The first window's keys are all
    new (one INSERT); the later ones are MERGEs. A first run crashes in its last window: verify's
    snapshot then equals the upstream at its checkpoint, and the next run finishes the window."""
    from tests.capture.pull_harness import make_config, wait_resolved, watermarks
    from tidelake.capture.changefeed.puller_thread import PullerThread
    from tidelake.codec.spark_types import spark_value
    from tidelake.lake.layout import LakeLayout
    from tidelake.merge.replica_schema import HIDDEN_COLUMNS
    from tidelake.merge.writers import spark_writer
    from tidelake.sim.tidb.session import SimTiDB
    from tidelake.verify.verifier import replica_snapshot

    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    with PullerThread(make_config(sim, lake)) as run:
        wait_resolved(lake, {}, 1, run)
        tidb.create_table("shop", "orders", [("id", "bigint"), ("v", "varchar(20)")], primary_key=["id"])
        for i in range(1, 6):
            with tidb.txn() as t:
                t.insert("shop", "orders", {"id": i, "v": f"v{i}"})
        with tidb.txn() as t:
            t.update("shop", "orders", {"id": 2}, {"v": "two"})
            t.delete("shop", "orders", {"id": 3})
        tidb.add_index("shop", "orders", "by_v", ["v"])  # no barrier: the window runs across it
        with tidb.txn() as t:  # inserted, deleted and inserted again in one window: TiKV's old values decide
            t.insert("shop", "orders", {"id": 6, "v": "v6"})
        with tidb.txn() as t:
            t.delete("shop", "orders", {"id": 6})
            t.delete("shop", "orders", {"id": 5})
        with tidb.txn() as t:
            t.insert("shop", "orders", {"id": 6, "v": "again"})
            t.insert("shop", "orders", {"id": 5, "v": "back"})
        tidb.drop_index("shop", "orders", "by_v")
        tidb.add_column("shop", "orders", ("note", "varchar(10)"))
        with tidb.txn() as t:
            t.update("shop", "orders", {"id": 4}, {"id": 40, "note": "moved"})  # PK change
        last = t.commit_ts
        pids = tidb.table_info("shop", "orders").physical_ids()
        wait_resolved(lake, {pid: last for pid in pids}, last, run)
    assert run.error is None
    layout = LakeLayout(str(lake))
    real_merge = spark_writer.run_merge_spec

    def crash_in_a_merge(*args):
        raise Crash("injected in the MERGE of a window")

    def upstream_at(ts: int) -> list[dict]:
        info = tidb.table_info_at("shop", "orders", ts)
        return sorted(({c.name: spark_value(row.get(c.name), c.field_type) for c in info.public_columns()}
                       for row in tidb.select_all("shop", "orders", ts=ts)), key=lambda r: r["id"])

    def replica_at(path: str, version: int) -> list[dict]:
        rows = spark.read.format("delta").option("versionAsOf", version).load(path).collect()
        return sorted(({k: v for k, v in r.asDict().items() if k not in HIDDEN_COLUMNS} for r in rows),
                      key=lambda r: r["id"])

    monkeypatch.setattr(spark_writer, "run_merge_spec", crash_in_a_merge)
    (result,) = run_merge(spark, layout, tables=["shop.orders"]).tables
    assert result.status == MergeStatus.ERROR and "injected" in result.reason
    path = ReplicaCatalog(layout).get(result.table_key).path
    version, checkpoint = replica_snapshot(path)
    assert replica_at(path, version) == upstream_at(checkpoint)

    monkeypatch.setattr(spark_writer, "run_merge_spec", real_merge)
    (result,) = run_merge(spark, layout, tables=["shop.orders"]).tables
    assert result.status == MergeStatus.MERGED
    checkpoint = result.checkpoint_after
    landed = watermarks(lake)  # the DDL watermark bounds every table too (docs/design.md#timestamps-and-watermarks)
    assert checkpoint >= last and checkpoint == min([landed.ddl_resolved, *(landed.table_resolved[p] for p in pids)])
    assert replica_snapshot(path) == (DeltaTable(path).version(), checkpoint)
    replica = replica_at(path, DeltaTable(path).version())
    assert replica == upstream_at(checkpoint)
    assert {r["id"] for r in replica} == {1, 2, 5, 6, 40}


def test_a_table_thread_has_its_own_session_with_the_callers_runtime_confs(any_spark):
    """A table's thread gets a session of the same application (newSession() locally, a cloned
    server-side session over Spark Connect) with the caller's runtime confs; the txn confs of
    one table must not leak into another."""
    from tidelake.merge.txn_confs import TXN_VERSION_CONF
    from tidelake.spark.spark_session import is_remote, release_session, sibling_session

    spark = any_spark
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    try:
        session = sibling_session(spark)
        try:
            assert session is not spark
            if not is_remote(spark):
                assert session.sparkContext is spark.sparkContext
            assert session.conf.get("spark.sql.shuffle.partitions") == "3"
            session.conf.set(TXN_VERSION_CONF, "42")
            assert spark.conf.get(TXN_VERSION_CONF, None) is None
        finally:
            release_session(session)  # a Connect session left open keeps the test process alive
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
