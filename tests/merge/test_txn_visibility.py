"""A transaction appears in its replica in ONE Delta version (issue: transactions of any size).

The simulator commits small transactions around one big one; the real puller lands them under a
small memory quota, so the big transaction's prewrites spill to the puller's spill file and its
rows reach the changelog in several flushes (the changelog holds part of it for a while). Merges
run while it lands, each splitting its window into chunks (a small max_chunk_rows), on each
writer. Then a reader reads EVERY version of the replica's log with deltalake (not through the
merge code) and finds each transaction wholly or not at all, and the rows equal to the
simulator's MVCC snapshot at the checkpoint that version records.
"""

from __future__ import annotations

import logging
import time

import pymysql
import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import by_driver
from merge.txn_harness import COLUMNS, HOLD_S, changelog_counts, insert_txn, spilled_rows, spilling_puller

from tests.capture.pull_harness import config_doc, small_sim, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.config_writer import config_from_document
from tidelake.lake.checkpoint import MERGE_APP_ID, read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge import table_merge
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.sim.sql.server import SqlServer
from tidelake.sim.tidb.session import SimTiDB

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

DB = "shop"
POLLED, CHUNKED = "t", "u"  # merged again and again while the rows land / once, cut into chunks
BIG_ROWS = 1500  # per table
SMALL_TXNS = 4  # before and after the big one
SMALL_ROWS = 50
QUOTA = "256KiB"  # the big transaction is ~1.7 MiB
CHUNK_ROWS = 400  # the window holding every transaction is cut into several chunks


def _rows_by_version(path: str) -> list[tuple[int, int | None, set[tuple[int, str]]]]:
    """(version, its checkpoint, its (id, txn) rows) of every version of the replica's log."""
    latest = DeltaTable(path).version()
    out = []
    for version in range(latest + 1):
        table = DeltaTable(path, version=version)
        rows = table.to_pyarrow_table(columns=["id", "txn"]).to_pylist()
        out.append((version, table.transaction_version(MERGE_APP_ID), {(r["id"], r["txn"]) for r in rows}))
    return out


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_each_transaction_is_in_one_replica_version_whatever_spills_and_splits(spark, tmp_path, monkeypatch,
                                                                              caplog, writer):
    if writer == "spark":  # every window through Spark, none on the driver
        monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)
    caplog.set_level(logging.INFO, logger="tidelake.capture.eventfeed.prewrites")
    layout = LakeLayout(str(tmp_path / "lake"))
    with spilling_puller(tmp_path / "lake", DB, QUOTA) as (cluster, puller):
        tidb = SimTiDB(cluster)
        tidb.create_database(DB)
        for table in (POLLED, CHUNKED):
            tidb.create_table(DB, table, COLUMNS, primary_key=["id"])
        txns: dict[str, tuple[int, set[int]]] = {}  # label -> (commit ts, ids)
        sizes = [("before", SMALL_ROWS)] * SMALL_TXNS + [("big", BIG_ROWS)] + [("after", SMALL_ROWS)] * SMALL_TXNS
        next_id = 1
        for n, (kind, rows) in enumerate(sizes):
            label, ids = f"{kind}{n}", range(next_id, next_id + rows)
            hold_s = HOLD_S if kind == "big" else 0.0
            txns[label] = (insert_txn(tidb, DB, (POLLED, CHUNKED), label, ids, hold_s), set(ids))
            next_id += rows
        final = cluster.tso.next()
        polled, deadline = None, time.monotonic() + 120
        while polled is None or (read_checkpoint(polled) or 0) < final:  # merges while the rows land
            assert time.monotonic() < deadline, f"{POLLED} did not reach {final}"
            for result in run_merge(spark, layout, tables=[f"{DB}.{POLLED}"], max_chunk_rows=CHUNK_ROWS).tables:
                assert result.status not in (MergeStatus.ERROR, MergeStatus.STOPPED), result.reason
            entry = ReplicaCatalog(layout).find(DB, POLLED)
            polled = entry.path if entry is not None else None
        # every transaction landed in CHUNKED too (its region resolves on its own): the CREATE,
        # then one window holding them all, cut into chunks
        wait_resolved(layout.root, dict.fromkeys(tidb.table_info(DB, CHUNKED).physical_ids(), final), final, puller)
        (chunked,) = run_merge(spark, layout, tables=[f"{DB}.{CHUNKED}"], max_chunk_rows=CHUNK_ROWS).tables
        assert chunked.status == MergeStatus.MERGED and chunked.windows >= 2, chunked

        big = f"big{SMALL_TXNS}"
        spilled = spilled_rows(caplog.records)
        assert max(spilled, default=0) > BIG_ROWS, spilled  # the prewrites waited in the spill file
        landed = changelog_counts(layout, txns[big][0])
        assert len(landed - {0, 2 * BIG_ROWS}) > 0, landed  # the changelog held part of it at some version
        for table in (POLLED, CHUNKED):
            path = ReplicaCatalog(layout).find(DB, table).path
            by_delta_rs = {by_driver(c) for c in DeltaTable(path).history()
                           if c.get("operation") in ("WRITE", "MERGE")}
            assert by_delta_rs == {writer == "delta-rs"}  # every window by the writer under test
            versions = _rows_by_version(path)
            for version, checkpoint, rows in versions:
                labels = [label for _, label in rows]
                for label, (_, ids) in txns.items():
                    assert labels.count(label) in (0, len(ids)), \
                        f"{table} version {version} holds {labels.count(label)} of the {len(ids)} rows of {label}"
                upstream = {(r["id"], r["txn"]) for r in tidb.select_all(DB, table, ts=checkpoint)}
                assert rows == upstream, f"{table} version {version} differs from the upstream at {checkpoint}"
            assert versions[-1][1] >= final and versions[-1][2] == {(i, label) for label, (_, ids) in txns.items()
                                                                    for i in ids}


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_a_ddl_that_moves_or_removes_rows_is_in_one_replica_version(spark, tmp_path, monkeypatch, writer):
    """A DDL's job, like a transaction, is visible in one version: the rows it removes leave in the
    commit that brings TiDB's copies (REORGANIZE PARTITION, PARTITION BY) or records its ts
    (TRUNCATE PARTITION, TRUNCATE TABLE), so every version of the replica equals the simulator's
    snapshot at the checkpoint it records. (DROP PARTITION is left out: TiDB hides the partition
    from reads at the job's first state change, before its ts, which the replica follows.)"""
    if writer == "spark":
        monkeypatch.setattr(table_merge, "DRIVER_WINDOW_MAX_ROWS", -1)
    layout = LakeLayout(str(tmp_path / "lake"))
    with small_sim() as cluster:
        tidb = SimTiDB(cluster)
        doc = config_doc(cluster, tmp_path / "lake", rules=(f"{DB}.*",), flush="100ms")
        with PullerThread(config_from_document(doc, "test.toml"), progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            with SqlServer(tidb, port=0) as server:
                conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
                with conn.cursor() as cursor:
                    for statement in (
                        f"CREATE DATABASE {DB}", f"USE {DB}",
                        "CREATE TABLE pt (id INT PRIMARY KEY, txn VARCHAR(16)) PARTITION BY RANGE (id) "
                        "(PARTITION p0 VALUES LESS THAN (10), PARTITION pmax VALUES LESS THAN MAXVALUE)",
                        "CREATE TABLE np (id INT PRIMARY KEY, txn VARCHAR(16))",
                        "INSERT INTO pt VALUES (1, 'a'), (12, 'a'), (25, 'a'), (40, 'a')",
                        "INSERT INTO np VALUES (1, 'a'), (2, 'a'), (3, 'a')",
                        "ALTER TABLE pt REORGANIZE PARTITION pmax INTO (PARTITION p1 VALUES LESS THAN (30), "
                        "PARTITION pmax VALUES LESS THAN MAXVALUE)",
                        "ALTER TABLE np PARTITION BY HASH (id) PARTITIONS 2",
                        "INSERT INTO pt VALUES (2, 'b'), (13, 'b')",
                        "ALTER TABLE pt TRUNCATE PARTITION p1",
                        "INSERT INTO np VALUES (4, 'b')",
                        "TRUNCATE TABLE np",
                    ):
                        cursor.execute(statement)
                conn.close()
            final = cluster.tso.next()
            ids = [pid for t in ("pt", "np") for pid in tidb.table_info(DB, t).physical_ids()]
            wait_resolved(layout.root, dict.fromkeys(ids, final), final, puller)
        results = {r.table: r for r in run_merge(spark, layout, until_ts=final).tables}
        for table, ddls in (("pt", 3), ("np", 3)):
            result = results[f"{DB}.{table}"]
            assert result.checkpoint_after == final and result.ddls_applied == ddls, result
            path = ReplicaCatalog(layout).find(DB, table).path
            by_delta_rs = {by_driver(c) for c in DeltaTable(path).history()
                           if c.get("operation") in ("WRITE", "MERGE", "DELETE")}
            assert by_delta_rs == {writer == "delta-rs"}  # every row commit by the writer under test
            for version, checkpoint, rows in _rows_by_version(path):
                upstream = {(r["id"], r["txn"]) for r in tidb.select_all(DB, table, ts=checkpoint)}
                assert rows == upstream, f"{table} version {version} differs from the upstream at its checkpoint"
