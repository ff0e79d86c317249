"""`tidelake verify` against the simulator: a replica built by the real puller and merge matches a
KvScan snapshot of the upstream; a tampered replica (one row deleted, one added, one value
changed) is caught key by key; the CLI exits 0 / 1 accordingly.

The upstream tables come from the seeded workload planner: int, clustered common and
`_tidb_rowid` handles, range and hash partitions and a table with one column of every type, so
the comparison exercises every decoder and Spark value conversion.
"""

from __future__ import annotations

import pytest

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.lake.layout import LakeLayout
from tidelake.sim.cluster import SimCluster
from tidelake.table_filter import TableFilter
from tidelake.verify.verifier import (
    DIFFERENT,
    EXTRA,
    MISSING,
    ComparedShape,
    RowComparison,
    Verdict,
    Verifier,
    normalize,
    schema_problems,
)

DB = "demo"  # the demo changefeed's workload database
# int handle, clustered common handle, _tidb_rowid, range partitions, one column of every type
TABLES = ("orders", "accounts", "events", "metrics", "type_zoo", "late")
RULES = tuple(f"{DB}.{t}" for t in TABLES)


@pytest.fixture(scope="module")
def built(spark, tmp_path_factory):
    """A simulator, its lake after pull + merge up to one ts, and a snapshot reader of it."""
    from tidelake.merge.merge_run import run_merge
    from tidelake.sim.tidb.session import SimTiDB
    from tidelake.sim.workload import WorkloadRunner
    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient

    workdir = tmp_path_factory.mktemp("verify")
    cluster = SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        layout = LakeLayout(str(workdir / "lake"))
        config = make_config(cluster, workdir / "lake", rules=RULES, flush="300ms")
        with PullerThread(config, progress_interval_s=3600) as puller:
            wait_resolved(layout.root, {}, 1, puller)
            # created after the start, so each replica starts from its CREATE (no bootstrap needed)
            WorkloadRunner(tidb, "smoke", seed=3, database=DB).run_ops(40)
            final = cluster.tso.next()
            wait_resolved(layout.root, dict.fromkeys(tidb.physical_ids(TableFilter.parse(RULES)), final), final, puller)
            report = run_merge(spark, layout, until_ts=final)
            assert not report.failed, report.failed
            late = tidb.create_table(DB, "late", [("id", "bigint"), ("v", "int")], primary_key=["id"]).finished_ts
            wait_resolved(layout.root, {}, late, puller)
        pd = PDClient([cluster.pd_address])
        with SnapshotReader(pd) as reader:
            yield cluster, tidb, layout, reader, final
        pd.close()


def replica_path(layout: LakeLayout, table: str) -> str:
    from tidelake.lake.replica_catalog import read_entries

    return next(e.path for e in read_entries(layout).values() if f"{e.db}.{e.name}" == table)


@pytest.mark.spark
@pytest.mark.timeout(1800)  # builds the module's lake (pull + merge of five tables) on a shared 2-core box
def test_replicas_built_by_pull_and_merge_match_upstream(built, spark):
    cluster, tidb, layout, reader, final = built
    report = Verifier(spark, layout, reader).run()
    by_table = {v.table: v for v in report.tables}
    assert report.ok, [(v.table, v.status, v.note, v.diffs[:2]) for v in report.tables]
    assert set(by_table) == set(RULES)
    # created after the merge cap: in the DDL history, no replica yet -> reported, not failed
    assert by_table[f"{DB}.late"].status == Verdict.SKIPPED and "no replica" in by_table[f"{DB}.late"].note
    for db, name in (r.split(".") for r in RULES[:-1]):
        verdict = by_table[f"{db}.{name}"]
        expected_rows = len(tidb.select_all(db, name, final))
        assert (verdict.status, verdict.checkpoint) == (Verdict.MATCH, final)
        assert verdict.upstream_rows == verdict.replica_rows == expected_rows
    assert sum(v.upstream_rows for v in report.tables) > 0


@pytest.mark.spark
def test_tampered_replica_is_caught_key_by_key(built, spark):
    cluster, tidb, layout, reader, final = built
    table = f"{DB}.orders"
    path = replica_path(layout, table)
    rows = sorted(tidb.select_all(DB, "orders", final), key=lambda r: r["id"])
    gone, changed = rows[0]["id"], rows[1]["id"]
    added = max(r["id"] for r in rows) + 1000
    before = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").first()["version"]
    try:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = {gone}")
        spark.sql(f"UPDATE delta.`{path}` SET note = 'tampered' WHERE id = {changed}")
        spark.sql(f"INSERT INTO delta.`{path}` (id, note, _tidb_commit_ts) VALUES ({added}, 'extra', 1)")
        verdict = Verifier(spark, layout, reader).run([table]).tables[0]
    finally:
        spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {before}")
    assert verdict.status == Verdict.MISMATCH and verdict.checkpoint == final
    assert (verdict.missing, verdict.extra, verdict.different) == (1, 1, 1)
    assert verdict.upstream_rows == len(rows) and verdict.replica_rows == len(rows)
    diffs = {d.kind: d for d in verdict.diffs}
    assert diffs[MISSING].key == (gone,) and diffs[MISSING].replica is None
    assert diffs[MISSING].upstream["id"] == gone
    assert diffs[EXTRA].key == (added,) and diffs[EXTRA].upstream is None and diffs[EXTRA].replica["note"] == "extra"
    assert diffs[DIFFERENT].key == (changed,) and diffs[DIFFERENT].replica["note"] == "tampered"
    assert diffs[DIFFERENT].upstream["note"] == rows[1]["note"] != "tampered"
    # after RESTORE (a new version, same checkpoint) the replica matches again
    assert Verifier(spark, layout, reader).run([table]).tables[0].status == Verdict.MATCH


@pytest.mark.spark
def test_verify_cli_exit_codes(built, spark, capsys):
    cluster, tidb, layout, reader, final = built
    table = f"{DB}.accounts"
    args = ["verify", "--lake", layout.root, "--pd", cluster.pd_address, "--table", table]
    assert main(args) == 0
    assert "all replicas match" in capsys.readouterr().out
    path = replica_path(layout, table)
    before = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").first()["version"]
    try:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE true")
        assert main(args) == 1
        out = capsys.readouterr().out
        assert "verify failed" in out and "missing key=" in out
    finally:
        spark.sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {before}")
    assert main(["verify", "--lake", layout.root, "--pd", cluster.pd_address, "--table", "nope"]) == 2
    assert main(["verify", "--lake", layout.root, "--pd", cluster.pd_address, "--table", "demo.nope"]) == 2
    assert main(["verify", "--lake", layout.root]) == 2
    assert "tidelake: error:" in capsys.readouterr().err


@pytest.mark.spark
def test_a_lake_without_tables_fails_verify(built, spark, tmp_path):
    reader = built[3]
    report = Verifier(spark, LakeLayout(str(tmp_path / "lake")), reader).run()
    assert report.tables == [] and not report.ok  # nothing compared is a failure, not a pass


def test_normalize_makes_float32_and_utc_instants_comparable():
    from datetime import datetime, timedelta, timezone

    spark_float = 1.100000023841858  # what Spark returns for a FLOAT column holding 1.1
    assert normalize(1.1, "FLOAT") == normalize(spark_float, "FLOAT") and 1.1 != spark_float
    plus2 = timezone(timedelta(hours=2))
    assert normalize(datetime(2024, 1, 1, 2, tzinfo=plus2), "TIMESTAMP") == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert normalize([1.1, 2], "ARRAY<FLOAT>") == (normalize(spark_float, "FLOAT"), 2.0)


SHAPE = ComparedShape(("id", "v", "f"), ("BIGINT", "STRING", "FLOAT"), ("id",))


def test_row_comparison_is_a_multiset_keyed_by_handle():
    cmp = RowComparison(SHAPE, max_diffs=10)
    for i in range(4):
        cmp.add_upstream(b"k%d" % i, {"id": i, "v": f"v{i}", "f": 1.1})
    cmp.add_replica({"id": 0, "v": "v0", "f": 1.100000023841858})  # same row, float32 on the replica side
    cmp.add_replica({"id": 1, "v": "v1", "f": 1.1})
    cmp.add_replica({"id": 1, "v": "v1", "f": 1.1})  # a duplicate key in the replica is one extra row
    cmp.add_replica({"id": 2, "v": "changed", "f": 1.1})
    cmp.add_replica({"id": 9, "v": "v9", "f": 1.1})
    cmp.finish()
    assert (cmp.upstream_rows, cmp.replica_rows) == (4, 5)
    assert cmp.counts == {MISSING: 1, EXTRA: 2, DIFFERENT: 1}
    assert sorted((kind, key, raw) for kind, key, raw, _ in cmp.diffs) == [
        (DIFFERENT, (2,), b"k2"), (EXTRA, (1,), None), (EXTRA, (9,), None), (MISSING, (3,), b"k3")]


def test_row_comparison_keeps_only_the_first_diffs():
    cmp = RowComparison(SHAPE, max_diffs=2)
    for i in range(5):
        cmp.add_upstream(b"k%d" % i, {"id": i, "v": "x", "f": None})
    cmp.finish()
    assert cmp.counts[MISSING] == 5 and len(cmp.diffs) == 2


def test_schema_problems_name_missing_extra_and_retyped_columns():
    replica = {"id": "bigint", "v": "string", "f": "float", "_tidb_commit_ts": "bigint"}
    assert schema_problems(SHAPE, replica) == []
    problems = schema_problems(SHAPE, {"id": "int", "f": "float", "_tidb_commit_ts": "bigint", "gone": "string"})
    assert problems == ["column 'id' is int in the replica, upstream maps to bigint", "replica lacks column 'v'",
                        "replica has column 'gone' that upstream lacks"]
