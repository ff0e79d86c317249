"""The apply-level check: merge cycles and a syncpoint over a landed bank lake, with the merge
crashed at a DDL's creation commit, between a syncpoint's reads and its record and after a
window's commit (each followed by a fresh run), a lost acknowledgement of a window's commit and a
failed syncpoint record (each reported, then a fresh run), and maintenance before the final merge,
pass it; a replica changed behind the merge's back is named at the version that shows it."""

from __future__ import annotations

import shutil

import pytest
from deltalake import DeltaTable

from tidelake.nemesis.apply_check import check_replicas
from tidelake.nemesis.merge_cycles import merge_cycles
from tidelake.nemesis.plan import MERGE_CRASH, MERGE_WRITE_ERROR, MergeFault
from tidelake.nemesis.schedule import bank_tables

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def merged(spark, landed, tmp_path_factory):
    lake = tmp_path_factory.mktemp("merged") / "lake"
    shutil.copytree(landed.lake, lake)
    tables = bank_tables(landed.tidb, "shop")
    # merging to mid leaves a 1 s boundary below every table's reach: the syncpoint is recordable
    # however slowly the workload ran (a midpoint of funded..final may have none above it)
    faults = [MergeFault("merge_mid", "ddl_apply.before_commit", 2), MergeFault("merge_mid", "merge.next_table", 3),
              MergeFault("merge_mid", "merge.after_commit", 1, MERGE_WRITE_ERROR),
              MergeFault("syncpoint", "syncpoint.before_record", 1),
              MergeFault("syncpoint", "syncpoint.before_record", 1, MERGE_WRITE_ERROR),
              MergeFault("merge_final", "merge.after_commit", 1)]
    merged = merge_cycles(spark, str(lake), landed.mid_ts, landed.final_ts, faults, maintenance=True)
    assert merged.failures == [] and merged.maintained
    assert merged.write_errors == {"merge.after_commit": 1, "syncpoint.before_record": 1}
    crashes = [f for f in faults if f.kind == MERGE_CRASH]
    # the final merge may have nothing left to do (the syncpoint's cut can reach the final ts), so
    # its crash may find no commit to follow; every other crash must strike
    final = {c.point for c in crashes if c.step == "merge_final"}
    assert {p: n for p, n in merged.struck.items() if p not in final} == {
        c.point: 1 for c in crashes if c.step != "merge_final"}
    assert sum(merged.struck[p] for p in final) + sum(merged.missed.get(p, 0) for p in final) == len(final)
    report = check_replicas(spark, str(lake), landed.cluster.mvcc, tables, landed.bank.total, landed.bank.funded_ts,
                            landed.final_ts)
    return lake, tables, report


def test_merged_replicas_and_the_syncpoint_equal_the_upstream(landed, merged):
    _, tables, report = merged
    assert report.anomalies == []
    assert report.checkpoints >= 2 * len(tables)
    assert len(report.syncpoints) == 1 and report.syncpoints[0] >= landed.bank.funded_ts


@pytest.mark.parametrize("statement, expected", [
    ("UPDATE delta.`{path}` SET balance = balance + 1 WHERE id = 1", "replica_wrong_value"),
    ("DELETE FROM delta.`{path}` WHERE id = 2", "replica_lost"),
    ("INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` WHERE id = 3", "replica_duplicate"),  # applied twice
])
def test_a_replica_changed_behind_the_merge_is_named(spark, landed, merged, tmp_path, statement, expected):
    lake, tables, _ = merged
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    replica = copy / "shop" / "bank_range"
    spark.sql(statement.format(path=replica))
    report = check_replicas(spark, str(copy), landed.cluster.mvcc, tables, landed.bank.total, landed.bank.funded_ts,
                            landed.final_ts)
    named = {(a.kind, a.ts) for a in report.anomalies}
    # only the new version shows it, at the checkpoint it keeps
    assert named == {(expected, DeltaTable(str(replica)).transaction_version("tidelake-merge"))}, report.anomalies[:3]


def test_a_replica_left_behind_the_last_merge_is_named(spark, landed, merged):
    lake, tables, _ = merged
    report = check_replicas(spark, str(lake), landed.cluster.mvcc, tables, landed.bank.total,
                            landed.bank.funded_ts, landed.final_ts + (1 << 40))
    assert [a.kind for a in report.anomalies] == ["replica_behind"] * len(tables), report.anomalies[:3]
