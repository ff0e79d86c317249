"""`tidelake status` on a lake written by the real puller (lander, watermarks, ddl) and merge.

The expected values come from the lake's own sources of truth read independently here: the
watermarks table, the DDL jobs SimTiDB returned, and the checkpoint the merge was capped at.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import datetime, timezone

import jsonschema
import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from status.status_schema import valid

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake import tso
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.control import read_control
from tidelake.lake.history_table import SOFT_DELETES_PROPERTY
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.replica_facts import ReplicaFacts, read_replica_facts
from tidelake.lake.watermarks import read_watermarks
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries
from tidelake.sim.cluster import SimCluster
from tidelake.status.status_report import (
    SCHEMA_VERSION,
    STATE_PENDING,
    FactsSource,
    NowSource,
    StatusReport,
    TableStatus,
    collect_status,
    utc_text,
)
from tidelake.table_filter import TableFilter

DB = "demo"
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
    doc = valid(report.to_json())
    assert doc["schema_version"] == SCHEMA_VERSION and {t["state"] for t in doc["tables"]} == {STATE_PENDING}


@pytest.mark.spark
@pytest.mark.timeout(1200)  # first Spark use of a run starts the JVM; merges on a shared 2-core box
def test_status_after_merge_shows_checkpoint_lag_pending_ddl_and_last_merge(pulled, spark, capsys):
    from tidelake.merge.merge_run import run_merge

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

    doc = valid(report.to_json())["tables"]
    row = next(t for t in doc if t["table"] == f"{DB}.orders")
    assert row["checkpoint_utc"] == utc_text(cap) and row["checkpoint_utc"].endswith("Z")
    assert row["pending_ddl"]["action"] == "add column" and row["pending_ddl"]["commit_utc"] == utc_text(job.finished_ts)
    assert row["last_merge"]["rows_in"] == 5
    # no DDL needed a reader feature: status says deltalake reads it, and it does
    assert (row["reader_features"], row["deltalake_readable"]) == ([], True)
    assert DeltaTable(row["path"]).to_pyarrow_table().num_rows == 5

    assert main(["status", "--lake", layout.root, "--pd", cluster.pd_address, "--json"]) == 0
    cli = valid(json.loads(capsys.readouterr().out))
    assert cli["now_source"] == NowSource.PD and {t["table"] for t in cli["tables"]} == {f"{DB}.orders", f"{DB}.events"}
    assert main(["status", "--lake", layout.root]) == 0
    text = capsys.readouterr().out
    assert "demo.orders" in text and "deltalake ✓" in text


class _Died(Exception):
    pass


def _die(name: str, owner: object) -> None:
    raise _Died(name)


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_a_merge_that_dies_before_its_log_append_leaves_status_behind_the_replica_never_ahead(pulled, spark):
    from tidelake.failpoints import armed
    from tidelake.merge.merge_run import run_merge

    cluster, tidb, layout, puller = pulled
    ids = tidb.physical_ids(TableFilter.parse((f"{DB}.*",)))
    first = cluster.tso.next()
    wait_resolved(layout.root, dict.fromkeys(ids, first), first, puller)
    assert not run_merge(spark, layout, until_ts=first, tables=[f"{DB}.events"]).failed
    with tidb.txn() as txn:
        txn.insert(DB, "events", {"k": 100})
    second = cluster.tso.next()
    wait_resolved(layout.root, dict.fromkeys(ids, second), second, puller)
    with armed(["merge.before_log"], _die), pytest.raises(_Died):
        run_merge(spark, layout, until_ts=second, tables=[f"{DB}.events"])
    path = by_name(collect_status(layout))[f"{DB}.events"].path
    real = _real_checkpoint(path)
    cheap = by_name(collect_status(layout))[f"{DB}.events"]
    assert real == second and cheap.facts_source == FactsSource.MERGE_LOG and cheap.checkpoint_ts == first < real
    exact = by_name(collect_status(layout, exact=True))[f"{DB}.events"]
    assert exact.facts_source == FactsSource.REPLICA and exact.checkpoint_ts == real
    assert not run_merge(spark, layout, until_ts=second, tables=[f"{DB}.events"]).failed  # an idle run logs again
    assert by_name(collect_status(layout))[f"{DB}.events"].checkpoint_ts == real


def test_status_of_an_empty_lake_writes_nothing(tmp_path):
    report = collect_status(LakeLayout(str(tmp_path)))
    assert report.tables == [] and report.changelog_version == -1 and valid(report.to_json())["tables"] == []
    with pytest.raises(jsonschema.ValidationError, match="'renamed' was unexpected"):
        valid({**report.to_json(), "renamed": 1})  # the schema holds the output to its documented keys
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


# ---- where a replica's facts come from: the merge log, or the replica's own log -----------------

def _commit(path: str, checkpoint: int, properties: dict[str, str] | None = None) -> None:
    """One commit recording `checkpoint` as the merge's txn, as every merge commit does."""
    data = pa.table({"id": pa.array([checkpoint % 1000], pa.int64())})
    write_deltalake(path, data, mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction(MERGE_APP_ID, checkpoint)]))
    if properties:  # Spark sets them on real replicas; delta-rs refuses unknown keys on write
        DeltaTable(path).alter.set_table_properties(properties, raise_if_not_exists=False)


def _logged(layout: LakeLayout, key: int, name: str, checkpoint: int, facts: ReplicaFacts | None) -> None:
    now = datetime.now(timezone.utc)
    append_entries(layout, [MergeLogEntry("run", key, name, MergeStatus.MERGED, None, checkpoint, 1, 0, 1, 1, 0.1, None,
                                          now, now, facts)])


def _real_checkpoint(path: str) -> int | None:
    """The replica's txn version read straight from its Delta log."""
    return DeltaTable(path).transaction_version(MERGE_APP_ID)


@pytest.fixture
def merged_lake(pulled, tmp_path):
    """A copy of the pulled lake's watermarks and DDL history with a replica of each table written
    by delta-rs (a merge's commits: rows + the merge txn) and a merge-log entry for each, as a merge
    run leaves them."""
    _, _, source, _ = pulled
    layout = LakeLayout(str(tmp_path))
    for table in ("watermarks", "ddl"):
        shutil.copytree(getattr(source, table), getattr(layout, table))
    catalog = ReplicaCatalog(layout)
    base = read_watermarks(layout).ddl_resolved - 1000
    history = read_control(layout).history
    keys = {history.current_name(k)[1]: k for k in history.live_tables()}
    replicas = {}
    for name in ("orders", "events"):
        entry = catalog.assign(keys[name], DB, name, base)
        _commit(entry.path, base, {SOFT_DELETES_PROPERTY: "true"} if name == "orders" else None)
        _logged(layout, entry.table_key, f"{DB}.{name}", base, read_replica_facts(layout, entry.path))
        replicas[name] = entry
    return layout, replicas, base


def test_status_takes_replica_facts_from_the_merge_log(merged_lake):
    layout, replicas, base = merged_lake
    report = collect_status(layout)
    tables = by_name(report)
    assert {t["facts_source"] for t in valid(report.to_json())["tables"]} == {FactsSource.MERGE_LOG}
    orders = tables[f"{DB}.orders"]
    assert orders.facts_source == FactsSource.MERGE_LOG and orders.checkpoint_ts == base
    assert orders.checkpoint_ts == _real_checkpoint(replicas["orders"].path)
    assert orders.soft_deletes is True and tables[f"{DB}.events"].soft_deletes is False
    assert (orders.reader_features, orders.deltalake_readable, orders.history) == ([], True, None)


def test_a_crash_between_the_replica_commit_and_the_merge_log_leaves_status_behind_never_ahead(merged_lake):
    layout, replicas, base = merged_lake
    path = replicas["orders"].path
    _commit(path, base + 500)  # the run committed, then died before its merge-log append
    real = _real_checkpoint(path)
    cheap = by_name(collect_status(layout))[f"{DB}.orders"]
    assert real == base + 500 and cheap.checkpoint_ts == base < real  # behind, as documented
    exact = by_name(collect_status(layout, exact=True))[f"{DB}.orders"]
    assert exact.facts_source == FactsSource.REPLICA and exact.checkpoint_ts == real
    # the table's next run logs what it reads: status catches up
    _logged(layout, replicas["orders"].table_key, f"{DB}.orders", real, read_replica_facts(layout, path))
    assert by_name(collect_status(layout))[f"{DB}.orders"].checkpoint_ts == real


def test_status_reads_the_replica_when_the_merge_log_names_another_folder_or_no_facts(merged_lake):
    layout, replicas, base = merged_lake
    # a rebuild: a new folder whose replica starts over BELOW what the log recorded for the old one
    rebuilt = dataclasses.replace(replicas["orders"], path=replicas["orders"].path + "__rebuilt")
    ReplicaCatalog(layout).upsert([rebuilt])
    _commit(rebuilt.path, base - 700)
    # a log entry without facts (a run that failed before the table's own handling, an older log)
    _logged(layout, replicas["events"].table_key, f"{DB}.events", None, None)
    tables = by_name(collect_status(layout))
    orders, events = tables[f"{DB}.orders"], tables[f"{DB}.events"]
    assert orders.facts_source == FactsSource.REPLICA and orders.checkpoint_ts == _real_checkpoint(rebuilt.path)
    assert orders.checkpoint_ts == base - 700 and orders.soft_deletes is False
    assert events.facts_source == FactsSource.REPLICA and events.checkpoint_ts == _real_checkpoint(replicas["events"].path)
