"""`tidelake status` on a lake written by the real puller (lander, watermarks, ddl) and merge.

The expected values come from the lake's own sources of truth read independently here: the
watermarks table, the DDL jobs SimTiDB returned, and the checkpoint the merge was capped at.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake import tso
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.lake.layout import LakeLayout
from tidelake.lake.status import (
    SCHEMA_VERSION,
    STATE_PENDING,
    NowSource,
    StatusReport,
    TableStatus,
    collect_status,
    utc_text,
)
from tidelake.lake.watermarks import read_watermarks
from tidelake.sim.cluster import SimCluster
from tidelake.table_filter import TableFilter

DB = "demo"
TABLE_KEYS = {
    "table", "table_key", "state", "reason", "path", "physical_ids", "resolved_ts", "resolved_utc", "barrier_ts",
    "barrier_utc", "checkpoint_ts", "checkpoint_utc", "lag_seconds", "bound", "blocked", "pending_ddl",
    "last_merge", "last_error", "reader_features", "deltalake_readable", "soft_deletes", "history",
}
REPORT_KEYS = {
    "schema_version", "generated_at", "now_ts", "now_utc", "now_source", "lake", "ddl_resolved_ts",
    "ddl_resolved_utc", "changelog_version", "tables",
}


@pytest.fixture(scope="module")
def pulled(tmp_path_factory):
    """A running simulator + puller; two tables created after the changefeed start, with rows."""
    from tidelake.sim.tidb.session import SimTiDB

    workdir = tmp_path_factory.mktemp("status")
    cluster = SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(workdir / "lake"))
        config = make_config(cluster, workdir / "lake", rules=(f"{DB}.*",), flush="300ms")
        with PullerThread(config, progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            tidb.create_database(DB)
            tidb.create_table(DB, "orders", [("id", "bigint"), ("v", "varchar(8)")], primary_key=["id"])
            tidb.create_table(DB, "events", [("k", "int")],
                              partition={"type": "hash", "column": "k", "count": 2})
            for i in range(5):
                with tidb.txn() as txn:
                    txn.insert(DB, "orders", {"id": i, "v": f"v{i}"})
                    txn.insert(DB, "events", {"k": i})
            last = cluster.tso.next()
            wait_resolved(layout.root, dict.fromkeys(tidb.physical_ids(TableFilter.parse((f"{DB}.*",))), last), last, puller)
            yield cluster, tidb, layout, puller


def by_name(report):
    return {t.table: t for t in report.tables}


def test_status_before_any_merge_shows_watermarks_and_pending_tables(pulled):
    cluster, tidb, layout, _ = pulled
    marks = read_watermarks(layout)
    report = collect_status(layout)  # no PD: wall clock
    assert report.now_source == NowSource.WALL_CLOCK and report.ddl_resolved_ts == marks.ddl_resolved
    tables = by_name(report)
    assert set(tables) == {f"{DB}.orders", f"{DB}.events"}
    events = tables[f"{DB}.events"]
    physical = tidb.table_info(DB, "events").physical_ids()
    assert events.state == STATE_PENDING and events.checkpoint_ts is None and events.lag_seconds is None
    assert sorted(events.physical_ids) == sorted(physical) and len(physical) == 2
    # resolved ts is the MIN over the partitions (the watermarks may have moved since: <= now)
    assert events.resolved_ts is not None and events.resolved_ts <= min(read_watermarks(layout).table_resolved[p]
                                                                          for p in physical)
    assert events.pending_ddl is None and events.barrier_ts is not None
    doc = report.to_json()
    assert set(doc) == REPORT_KEYS and doc["schema_version"] == SCHEMA_VERSION
    assert all(set(t) == TABLE_KEYS for t in doc["tables"])
    json.dumps(doc)  # plain JSON types only


@pytest.mark.spark
@pytest.mark.timeout(1200)  # first Spark use of a run starts the JVM; merges on a shared 2-core box
def test_status_after_merge_shows_checkpoint_lag_pending_ddl_and_last_merge(pulled, spark, capsys):
    from tidelake.apply.merge_job import run_merge

    cluster, tidb, layout, puller = pulled
    cap = cluster.tso.next()
    wait_resolved(layout.root, dict.fromkeys(tidb.physical_ids(TableFilter.parse((f"{DB}.*",))), cap), cap, puller)  # so the merge reaches cap
    assert not run_merge(spark, layout, until_ts=cap).failed
    job = tidb.add_column(DB, "orders", ("note", "varchar(10)"))
    with tidb.txn() as txn:
        txn.update(DB, "orders", {"id": 1}, {"note": "x"})
    wait_resolved(layout.root, dict.fromkeys(tidb.physical_ids(TableFilter.parse((f"{DB}.*",))), txn.commit_ts), txn.commit_ts, puller)

    pd_now = cluster.tso.next()
    report = collect_status(layout, pd_now)
    assert report.now_source == NowSource.PD and report.now_ts == pd_now
    orders = by_name(report)[f"{DB}.orders"]
    assert orders.state == "active" and orders.checkpoint_ts == cap
    assert orders.lag_seconds == tso.lag_seconds(cap, pd_now)
    assert orders.barrier_ts == job.finished_ts - 1 and orders.bound == "barrier"  # the DDL cuts the window
    assert orders.pending_ddl.job_id == job.id and orders.pending_ddl.commit_ts == job.finished_ts
    assert orders.pending_ddl.action == "add column"
    assert orders.last_merge.status == "merged" and orders.last_merge.checkpoint_after == cap
    assert orders.last_merge.rows_in == 5 and orders.last_error is None

    doc = report.to_json()["tables"]
    row = next(t for t in doc if t["table"] == f"{DB}.orders")
    assert row["checkpoint_utc"] == utc_text(cap) and row["checkpoint_utc"].endswith("Z")
    assert row["pending_ddl"]["action"] == "add column" and row["pending_ddl"]["commit_utc"] == utc_text(job.finished_ts)
    assert row["last_merge"]["rows_in"] == 5
    # no DDL needed a reader feature: status says deltalake reads it, and it does
    assert (row["reader_features"], row["deltalake_readable"]) == ([], True)
    assert DeltaTable(row["path"]).to_pyarrow_table().num_rows == 5

    assert main(["status", "--lake", layout.root, "--pd", cluster.pd_address, "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["now_source"] == NowSource.PD and {t["table"] for t in cli["tables"]} == {f"{DB}.orders", f"{DB}.events"}
    assert main(["status", "--lake", layout.root]) == 0
    text = capsys.readouterr().out
    assert "demo.orders" in text and "deltalake ✓" in text


def test_status_of_an_empty_lake_writes_nothing(tmp_path):
    report = collect_status(LakeLayout(str(tmp_path)))
    assert report.tables == [] and report.changelog_version == -1
    assert list(tmp_path.iterdir()) == []


def test_status_target_errors_are_one_line(tmp_path, capsys):
    assert main(["status"]) == 2
    assert main(["status", "--config", str(tmp_path / "x.toml"), "--lake", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("tidelake: error:") for line in err)


def test_behind_counts_tables_without_a_replica_and_leaves_out_stopped_and_dropped_ones():
    target = tso.compose(1_800_000_000_000)
    tables = [TableStatus("demo.a", 1, "active", checkpoint_ts=target), TableStatus("demo.b", 2, "active",
              checkpoint_ts=target - 1), TableStatus("demo.c", 3, STATE_PENDING),
              TableStatus("demo.d", 4, "stopped", reason="unsupported DDL", checkpoint_ts=5),
              TableStatus("demo.e", 5, "dropped")]
    report = StatusReport("lake", target, NowSource.PD, None, 0, tables)
    assert [t.table for t in report.behind(target)] == ["demo.b", "demo.c"]
    assert [t.table for t in report.stopped()] == ["demo.d"]
