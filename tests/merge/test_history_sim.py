"""History tables and soft deletes end to end: SimTiDB writes, the real puller lands, merge with
[history] on, and both are compared with the simulator's own MVCC snapshot reads (select_all at a
ts), at every commit ts the workload observed; then `tidelake verify` checks them and catches a
tampered history and a wrongly flagged row.
"""

from __future__ import annotations

import pytest

from tests.capture.pull_harness import make_config, small_sim, wait_resolved
from tidelake.cli import main
from tidelake.config import HistoryConfig
from tidelake.lake.history_table import history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.merge.merge_run import run_merge
from tidelake.verify.verifier import Verdict, Verifier

DB = "shop"
CONFIG = HistoryConfig(scd2=(f"{DB}.orders",), soft_deletes=(f"{DB}.orders",))

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def lake(spark, tmp_path_factory):
    """Two merge rounds over a workload of inserts, updates of one key in one window and across
    windows, deletes, reinserts and an ADD COLUMN; yields what the checks need."""
    from tidelake.capture.changefeed.puller_thread import PullerThread
    from tidelake.sim.tidb.session import SimTiDB
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient

    workdir = tmp_path_factory.mktemp("history-sim")
    with small_sim() as cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(workdir / "lake"))
        config = make_config(cluster, workdir / "lake", rules=(f"{DB}.*",), flush="300ms")
        commits, checkpoints = [], []

        def txn(*ops):
            with tidb.txn() as t:
                for op, *args in ops:
                    getattr(t, op)(DB, "orders", *args)
            commits.append(t.commit_ts)

        def merge_round(puller):
            final = cluster.tso.next()
            pids = tidb.table_info(DB, "orders").physical_ids()
            wait_resolved(layout.root, dict.fromkeys(pids, final), final, puller)
            (result,) = run_merge(spark, layout, until_ts=final, history_config=CONFIG).tables
            assert result.checkpoint_after == final, result.reason
            checkpoints.append(final)

        with PullerThread(config, progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            tidb.create_database(DB)
            commits.append(tidb.create_table(DB, "orders", [("id", "bigint"), ("v", "varchar(20)")],
                                             primary_key=["id"]).finished_ts)
            txn(*(("insert", {"id": i, "v": f"v{i}"}) for i in range(1, 6)))
            txn(("update", {"id": 2}, {"v": "two"}))
            txn(("update", {"id": 2}, {"v": "TWO"}), ("delete", {"id": 3}))
            merge_round(puller)
            txn(("insert", {"id": 3, "v": "back"}), ("update", {"id": 1}, {"v": "one"}))
            txn(("delete", {"id": 4}), ("insert", {"id": 6, "v": "six"}))
            txn(("update", {"id": 6}, {"v": "SIX"}))
            commits.append(tidb.add_column(DB, "orders", ("note", "varchar(10)")).finished_ts)
            txn(("update", {"id": 5}, {"note": "noted"}), ("delete", {"id": 2}))
            merge_round(puller)
        pd = PDClient([cluster.pd_address])
        with SnapshotReader(pd) as reader:
            yield cluster, tidb, layout, reader, commits, checkpoints
        pd.close()


def orders_paths(layout: LakeLayout) -> tuple[str, str]:
    replica = next(e.path for e in read_entries(layout).values() if (e.db, e.name) == (DB, "orders"))
    return replica, history_path(layout, replica)


def upstream_at(tidb, ts: int, columns: list[str]) -> list[dict]:
    """The simulator's MVCC snapshot read of the table at ts."""
    return sorted(({c: r.get(c) for c in columns} for r in tidb.select_all(DB, "orders", ts=ts)), key=lambda r: r["id"])


def test_history_rows_valid_at_every_commit_ts_equal_the_upstream_snapshot(lake, spark):
    cluster, tidb, layout, reader, commits, checkpoints = lake
    _, history = orders_paths(layout)
    df = spark.read.format("delta").load(history)
    compared = 0
    for ts in sorted({*commits, *checkpoints}):
        if ts > checkpoints[-1]:
            continue
        columns = [c.name for c in tidb.table_info_at(DB, "orders", ts).public_columns() if c.name in df.columns]
        rows = df.where(f"_tidb_valid_from <= {ts} AND (_tidb_valid_to IS NULL OR {ts} < _tidb_valid_to)")
        history_rows = sorted(({c: r[c] for c in columns} for r in rows.collect()), key=lambda r: r["id"])
        assert history_rows == upstream_at(tidb, ts, columns), f"as of {ts}"
        compared += 1
    assert compared == len({*commits, *checkpoints})  # an async commit may share its ts with a checkpoint
    assert df.where("id = 2").count() == 3  # v2, two, TWO: each commit is a version, also inside a window


def test_soft_deleted_rows_are_the_keys_gone_since_an_earlier_checkpoint(lake, spark):
    cluster, tidb, layout, reader, commits, checkpoints = lake
    replica, _ = orders_paths(layout)
    rows = [r.asDict() for r in spark.read.format("delta").load(replica).collect()]
    final = checkpoints[-1]
    columns = [c.name for c in tidb.table_info_at(DB, "orders", final).public_columns()]
    live = sorted(({c: r[c] for c in columns} for r in rows if not r["_tidb_deleted"]), key=lambda r: r["id"])
    assert live == upstream_at(tidb, final, columns)
    now = {r["id"] for r in live}
    earlier = {r["id"] for ts in checkpoints[:-1] for r in tidb.select_all(DB, "orders", ts=ts)}
    assert {r["id"] for r in rows if r["_tidb_deleted"]} == earlier - now == {2, 4}


def test_verify_checks_history_and_soft_deletes_and_catches_tampering(lake, spark, capsys):
    cluster, tidb, layout, reader, commits, checkpoints = lake
    replica, history = orders_paths(layout)
    report = Verifier(spark, layout, reader).run()
    assert report.ok, (report.tables, report.histories)
    (table,), (hist,) = report.tables, report.histories
    assert (table.status, table.soft_deleted, table.deleted_but_upstream) == (Verdict.MATCH, 2, 0)
    assert hist.status == Verdict.MATCH and hist.checkpoint == checkpoints[-1] and hist.points >= 5
    args = ["verify", "--lake", layout.root, "--pd", cluster.pd_address]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "shop.orders history (checkpoint" in out and "✓ match at" in out
    assert "soft deletes: 2 rows flagged deleted, none upstream" in out

    def restore(path: str, version: int) -> None:
        spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {version}")

    before = spark.sql(f"DESCRIBE HISTORY delta.`{history}`").first()["version"]
    try:  # a version whose end moved: wrong at the ts between the two ends
        spark.sql(f"UPDATE delta.`{history}` SET _tidb_valid_to = _tidb_valid_to + 1 "
                  "WHERE id = 2 AND _tidb_valid_to IS NOT NULL")
        hist = Verifier(spark, layout, reader).run().histories[0]
        assert hist.status == Verdict.MISMATCH and hist.mismatched
        assert main(args) == 1 and "✗ mismatch" in capsys.readouterr().out
    finally:
        restore(history, before)
    before = spark.sql(f"DESCRIBE HISTORY delta.`{replica}`").first()["version"]
    try:  # a live row flagged deleted
        spark.sql(f"UPDATE delta.`{replica}` SET _tidb_deleted = true WHERE id = 1")
        table = Verifier(spark, layout, reader).run().tables[0]
        assert table.status == Verdict.MISMATCH and (table.missing, table.deleted_but_upstream) == (1, 1)
    finally:
        restore(replica, before)
    assert Verifier(spark, layout, reader).run().ok
