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


def test_replicas_changed_behind_the_merge_or_left_behind_it_are_named(spark, landed, merged, tmp_path):
    """Each bank replica changed its own way in one copy of the lake, checked against a last merge
    past every checkpoint: one check names each change by its table only, and every replica as
    behind."""
    lake, tables, _ = merged
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    paths = {t.name: copy / t.db / t.name for t in tables}
    row = spark.read.format("delta").load(str(paths["bank_clustered"])).select("region", "acct").first()
    changes = {
        "bank_range": ("UPDATE delta.`{path}` SET balance = balance + 1 WHERE id = 1", "replica_wrong_value"),
        "bank_clustered": (f"DELETE FROM delta.`{{path}}` WHERE region = '{row.region}' AND acct = {row.acct}",
                           "replica_lost"),
        "bank_nopk": ("INSERT INTO delta.`{path}` SELECT * FROM delta.`{path}` LIMIT 1", "replica_duplicate"),  # twice
    }
    for name, (statement, _) in changes.items():
        spark.sql(statement.format(path=paths[name]))
    beyond = landed.final_ts + (1 << 40)
    report = check_replicas(spark, str(copy), landed.cluster.mvcc, tables, landed.bank.total, landed.bank.funded_ts,
                            beyond)
    named = {(a.kind, a.table_id, a.ts) for a in report.anomalies}
    # only each new version shows its change, at the checkpoint it keeps
    changed = {(changes[t.name][1], t.physical_ids[0],
                DeltaTable(str(paths[t.name])).transaction_version("tidelake-merge")) for t in tables}
    assert named == changed | {("replica_behind", t.physical_ids[0], beyond) for t in tables}, report.anomalies[:6]
