"""DDL that moves rows or names between tables (issue #28 item 2), sent as SQL through the front,
pulled by the real puller, merged, and compared with the upstream at the checkpoint by `verify`:
a RENAME TABLES swap leaves each replica under its final name with its own rows and columns."""

from __future__ import annotations

import pymysql
import pytest

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.sim.cluster import SimCluster
from tidelake.sim.sql.server import SqlServer
from tidelake.sim.tidb.session import SimTiDB
from tidelake.table_filter import TableFilter
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient

DB = "moves"

SWAP = [
    "CREATE TABLE live (id INT PRIMARY KEY, v VARCHAR(10))",
    "CREATE TABLE shadow (id INT PRIMARY KEY, v VARCHAR(10), extra INT)",  # another shape: a mix-up shows
    "INSERT INTO live VALUES (1, 'old'), (2, 'old')",
    "INSERT INTO shadow VALUES (1, 'new', 10), (3, 'new', 30)",
    "RENAME TABLE live TO live_tmp, shadow TO live, live_tmp TO shadow",
    "INSERT INTO live VALUES (4, 'after', 40)",
    "UPDATE shadow SET v = 'after' WHERE id = 2",
]


def replicate_and_verify(spark, tmp_path, script: list[str]):
    """Run `script` through the SQL front with the puller on, merge to the final ts, verify."""
    from tidelake.merge.merge_run import run_merge  # pyspark: imported by this Spark test only
    from tidelake.verify.verifier import Verifier  # pyspark, as above

    cluster = SimCluster(n_stores=2, split_check_interval_s=0, gc_interval_s=0, server_workers=8,
                         cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(tmp_path / "lake"))
        config = make_config(cluster, tmp_path / "lake", rules=(f"{DB}.*",), flush="300ms")
        with SqlServer(tidb, port=0) as server, PullerThread(config, progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {DB}")
                cursor.execute(f"USE {DB}")
                for statement in script:
                    cursor.execute(statement)
            conn.close()
            final = cluster.tso.next()
            ids = tidb.physical_ids(TableFilter.parse([f"{DB}.*"]))
            wait_resolved(layout.root, dict.fromkeys(ids, final), final, puller)
        report = run_merge(spark, layout, until_ts=final)
        pd = PDClient([cluster.pd_address])
        try:
            with SnapshotReader(pd) as reader:
                verified = Verifier(spark, layout, reader).run()
        finally:
            pd.close()
    return layout, report, verified


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_rename_tables_swap_keeps_each_replica_under_its_final_name(spark, tmp_path):
    from tidelake.verify.verifier import Verdict  # pyspark: imported by this Spark test only

    layout, report, verified = replicate_and_verify(spark, tmp_path, SWAP)
    assert not report.failed, report.failed
    assert verified.ok, [(v.table, v.status, v.note, v.diffs[:2]) for v in verified.tables]
    tables = {v.table: v for v in verified.tables}
    assert set(tables) == {f"{DB}.live", f"{DB}.shadow"}
    assert all(v.status == Verdict.MATCH for v in tables.values())
    assert (tables[f"{DB}.live"].upstream_rows, tables[f"{DB}.shadow"].upstream_rows) == (3, 2)
    names = sorted(f"{e.db}.{e.name}" for e in read_entries(layout).values())
    assert names == [f"{DB}.live", f"{DB}.shadow"]  # no replica left under the intermediate name
