"""A history table follows rows that move between partitions and tables: REORGANIZE PARTITION, a
first PARTITION BY and EXCHANGE PARTITION (with a table outside the filter, and between two
replicated tables) close the moved rows' versions and open their copies' at the DDL's ts; REMOVE
PARTITIONING keeps them. SimTiDB writes, the real puller lands (its read of the copies included),
merge with [history] on; the history's rows valid at every commit ts are compared with the
simulator's MVCC snapshot at that ts, and `verify` checks replica and history."""

from __future__ import annotations

import pytest

from tests.capture.pull_harness import make_config, small_sim, wait_resolved
from tidelake.config import HistoryConfig
from tidelake.lake.history_table import history_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries

DB = "shop"
TABLES = ("events", "plain", "xpt", "xnt")
CONFIG = HistoryConfig(scd2=tuple(f"{DB}.{t}" for t in TABLES), soft_deletes=())

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]


def test_history_rows_follow_reorganized_and_exchanged_partitions(spark, tmp_path):
    from tidelake.capture.changefeed.puller_thread import PullerThread  # grpc: imported by this test only
    from tidelake.merge.merge_log import MergeStatus  # pyspark, as above
    from tidelake.merge.merge_run import run_merge  # pyspark, as above
    from tidelake.sim.tidb import partition as part
    from tidelake.sim.tidb.session import SimTiDB
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient
    from tidelake.verify.verifier import Verdict, Verifier  # pyspark, as above

    with small_sim() as cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(tmp_path / "lake"))
        commits, checkpoints, created = [], [], {}

        def txn(db: str, table: str, *ops) -> None:
            with tidb.txn() as t:
                for op, *args in ops:
                    getattr(t, op)(db, table, *args)
            commits.append(t.commit_ts)

        def merge_round(puller) -> None:
            final = cluster.tso.next()
            pids = [pid for t in TABLES for pid in tidb.table_info(DB, t).physical_ids()]
            wait_resolved(layout.root, dict.fromkeys(pids, final), final, puller)
            results = run_merge(spark, layout, until_ts=final, history_config=CONFIG).tables
            assert [(r.status, r.checkpoint_after) for r in results] == [(MergeStatus.MERGED, final)] * len(TABLES), \
                [(r.table, r.reason) for r in results]
            checkpoints.append(final)

        with PullerThread(make_config(cluster, tmp_path / "lake", rules=(f"{DB}.*",), flush="300ms"),
                          progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            tidb.create_database(DB)
            tidb.create_database("outside")
            created["events"] = tidb.create_table(
                DB, "events", [("id", "bigint"), ("v", "varchar(20)")], primary_key=["id"],
                partition={"type": "range", "column": "id",
                           "bounds": [("p0", 10), ("p1", 20), ("pmax", "MAXVALUE")]}).finished_ts
            tidb.create_table("outside", "nt", [("id", "bigint"), ("v", "varchar(20)")], primary_key=["id"])
            created["plain"] = tidb.create_table(DB, "plain", [("id", "bigint"), ("v", "varchar(20)")],
                                                 primary_key=["id"]).finished_ts
            for name in ("xpt", "xnt"):  # an EXCHANGE between two replicated tables
                created[name] = tidb.create_table(
                    DB, name, [("id", "bigint"), ("v", "varchar(20)")], primary_key=["id"],
                    partition={"type": "range", "column": "id", "bounds": [("p0", 10), ("p1", "MAXVALUE")]}
                    if name == "xpt" else None).finished_ts
            commits.extend(created.values())
            txn(DB, "events", *(("insert", {"id": i, "v": f"v{i}"}) for i in (1, 2, 11, 25, 40)))
            txn(DB, "plain", *(("insert", {"id": i, "v": f"p{i}"}) for i in (1, 2, 3)))
            txn("outside", "nt", ("insert", {"id": 5, "v": "nt5"}), ("insert", {"id": 6, "v": "nt6"}))
            txn(DB, "xpt", ("insert", {"id": 1, "v": "x1"}), ("insert", {"id": 20, "v": "x20"}))
            txn(DB, "xnt", ("insert", {"id": 7, "v": "n7"}))
            merge_round(puller)
            txn(DB, "events", ("update", {"id": 25}, {"v": "moved soon"}))
            commits.append(tidb.reorganize_partition(DB, "events", ["pmax"], [("p2", ["30"]), ("pmax", ["MAXVALUE"])])
                           .finished_ts)
            txn(DB, "events", ("update", {"id": 25}, {"v": "moved"}), ("insert", {"id": 26, "v": "v26"}))
            commits.append(tidb.exchange_partition(DB, "events", "p0", "outside", "nt").finished_ts)
            txn(DB, "events", ("update", {"id": 5}, {"v": "in events"}), ("delete", {"id": 6}))
            txn("outside", "nt", ("update", {"id": 1}, {"v": "left events"}))
            commits.append(tidb.exchange_partition(DB, "xpt", "p0", DB, "xnt").finished_ts)
            txn(DB, "xpt", ("update", {"id": 7}, {"v": "n7 in xpt"}))
            txn(DB, "xnt", ("update", {"id": 1}, {"v": "x1 in xnt"}), ("insert", {"id": 2, "v": "n2"}))
            txn(DB, "plain", ("update", {"id": 2}, {"v": "two"}))
            spec = part.spec_from_dict({"type": "hash", "column": "id", "count": 2})
            commits.append(tidb.alter_partitioning(DB, "plain", spec).finished_ts)
            txn(DB, "plain", ("update", {"id": 3}, {"v": "three"}), ("insert", {"id": 4, "v": "p4"}))
            commits.append(tidb.remove_partitioning(DB, "plain").finished_ts)
            txn(DB, "plain", ("update", {"id": 4}, {"v": "four"}), ("delete", {"id": 1}))
            merge_round(puller)
        columns = ["id", "v"]
        histories = {e.name: spark.read.format("delta").load(history_path(layout, e.path))
                     for e in read_entries(layout).values()}
        for name, df in histories.items():
            for ts in sorted(t for t in {*commits, *checkpoints} if t >= created[name]):
                rows = df.where(f"_tidb_valid_from <= {ts} AND (_tidb_valid_to IS NULL OR {ts} < _tidb_valid_to)")
                got = sorted(({c: r[c] for c in columns} for r in rows.collect()), key=lambda r: r["id"])
                want = sorted(({c: r.get(c) for c in columns} for r in tidb.select_all(DB, name, ts=ts)),
                              key=lambda r: r["id"])
                assert got == want, f"{name} as of {ts}"
        df = histories["events"]
        assert [r["v"] for r in df.where("id = 25").orderBy("_tidb_valid_from").collect()] == \
            ["v25", "moved soon", "moved soon", "moved"]  # the REORGANIZE's copy is a version of its own
        pd = PDClient([cluster.pd_address])
        try:
            with SnapshotReader(pd) as reader:
                report = Verifier(spark, layout, reader).run()
        finally:
            pd.close()
        assert report.ok, ([(t.table, t.status, t.note, t.schema_problems, t.diffs[:2]) for t in report.tables],
                           [(h.table, h.status, h.note, h.mismatched[:2]) for h in report.histories])
        assert [t.status for t in report.tables] == [Verdict.MATCH] * len(TABLES)
        assert [h.status for h in report.histories] == [Verdict.MATCH] * len(TABLES)
        assert "_tidb_partition_id" not in histories["plain"].columns  # REMOVE PARTITIONING took it out
