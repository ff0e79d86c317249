"""DDL that moves rows or names between tables (issue #28 item 2), sent as SQL through the front,
pulled by the real puller, merged, and compared with the upstream at the checkpoint by `verify`:
a RENAME TABLES swap leaves each replica under its final name with its own rows and columns;
EXCHANGE PARTITION (with and without validation, twice) moves rows between the two replicas,
also across a crash after one replica's rows moved, and with a table outside the filter brings the
rows the replicated table received; REMOVE PARTITIONING re-keys the replica;
REORGANIZE PARTITION and PARTITION BY bring the rows TiDB copied into new partition ids.
One script, one cluster, one verify: the Spark cost is paid once."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.sim.sql.front_replication import replicate_and_verify
from tidelake.lake.replica_catalog import read_entries

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

EXCHANGE = [
    "CREATE TABLE pt (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
    "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE nt (id INT PRIMARY KEY, v INT)",
    "INSERT INTO pt VALUES (1, 1), (2, 2), (11, 11), (25, 25)",
    "INSERT INTO nt VALUES (5, 50), (6, 60)",
    "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE nt",
    "INSERT INTO pt VALUES (3, 3)",  # p0 now has nt's old physical id
    "DELETE FROM pt WHERE id = 6",
    "UPDATE nt SET v = 20 WHERE id = 2",  # nt now has p0's old physical id and rows
    "INSERT INTO nt VALUES (15, 0)",  # outside p0's range: only WITHOUT VALIDATION takes it
    "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE nt WITHOUT VALIDATION",
    "UPDATE pt SET v = 150 WHERE id = 15",
    "INSERT INTO nt VALUES (7, 70)",
]
# EXCHANGE PARTITION with a table the changefeed does not replicate (database `outside`), each way:
# the replicated table's received rows come from the puller's read at the job's finished ts.
EXCHANGE_OUTSIDE = [
    "CREATE DATABASE outside",
    "CREATE TABLE ept (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
    "PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE outside.ent (id INT PRIMARY KEY, v INT)",
    "INSERT INTO ept VALUES (1, 1), (2, 2), (30, 30)",
    "INSERT INTO outside.ent VALUES (4, 40), (5, 50)",
    "ALTER TABLE ept EXCHANGE PARTITION p0 WITH TABLE outside.ent",
    "INSERT INTO ept VALUES (6, 6)",
    "UPDATE ept SET v = 41 WHERE id = 4",
    "UPDATE outside.ent SET v = 10 WHERE id = 1",
    "CREATE TABLE outside.opt (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN "
    "(10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "CREATE TABLE ont (id INT PRIMARY KEY, v INT)",
    "INSERT INTO outside.opt VALUES (7, 7), (8, 8), (50, 50)",
    "INSERT INTO ont VALUES (3, 3)",
    "ALTER TABLE outside.opt EXCHANGE PARTITION p0 WITH TABLE ont",
    "INSERT INTO ont VALUES (9, 9)",
    "DELETE FROM ont WHERE id = 7",
]
COLLAPSE = [
    "CREATE TABLE hp (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 3",
    "INSERT INTO hp VALUES (1, 1), (2, 2), (3, 3), (4, 4)",
    "ALTER TABLE hp REMOVE PARTITIONING",
    "INSERT INTO hp VALUES (5, 5)",
    "DELETE FROM hp WHERE id = 1",
]
# REORGANIZE PARTITION (RANGE and LIST, split and merge) and PARTITION BY (a first partitioning
# of a table keyed by _tidb_rowid, and a re-partitioning): rows TiDB copied into new partition ids
# reach the replica through the puller's read at the job's finished ts, DML after lands in them.
REORGANIZE = [
    "CREATE TABLE rr (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
    "PARTITION p1 VALUES LESS THAN (20), PARTITION pmax VALUES LESS THAN MAXVALUE)",
    "INSERT INTO rr VALUES (1, 1), (12, 12), (18, 18), (25, 25), (40, 40)",
    "ALTER TABLE rr REORGANIZE PARTITION pmax INTO (PARTITION p2 VALUES LESS THAN (30), "
    "PARTITION pmax VALUES LESS THAN MAXVALUE)",  # split
    "INSERT INTO rr VALUES (26, 26), (50, 50)",
    "UPDATE rr SET v = 250 WHERE id = 25",
    "ALTER TABLE rr REORGANIZE PARTITION p0, p1 INTO (PARTITION p01 VALUES LESS THAN (20))",  # merge
    "DELETE FROM rr WHERE id = 1",
    "UPDATE rr SET v = 0 WHERE id = 12",
    "CREATE TABLE lr (id INT PRIMARY KEY, v INT) PARTITION BY LIST (id) (PARTITION pa VALUES IN (1, 2, 3), "
    "PARTITION pb VALUES IN (4, 5, 6), PARTITION pc VALUES IN (7, 8, 9))",
    "INSERT INTO lr VALUES (1, 1), (4, 4), (5, 5), (7, 7), (9, 9)",
    "ALTER TABLE lr REORGANIZE PARTITION pa, pb INTO (PARTITION pab VALUES IN (1, 2, 3, 4, 5, 6))",  # merge
    "ALTER TABLE lr REORGANIZE PARTITION pc INTO (PARTITION pc1 VALUES IN (7), PARTITION pc2 VALUES IN (8, 9))",
    "INSERT INTO lr VALUES (8, 8), (2, 2)",
    "DELETE FROM lr WHERE id = 4",
]
PARTITION_BY = [
    "CREATE TABLE pb (id INT, v VARCHAR(10))",  # no primary key: rows keyed by _tidb_rowid
    "INSERT INTO pb VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
    "ALTER TABLE pb PARTITION BY HASH (id) PARTITIONS 3",
    "INSERT INTO pb VALUES (5, 'e')",
    "UPDATE pb SET v = 'z' WHERE id = 2",
    "ALTER TABLE pb PARTITION BY RANGE (id) (PARTITION r0 VALUES LESS THAN (3), "
    "PARTITION r1 VALUES LESS THAN MAXVALUE)",
    "DELETE FROM pb WHERE id = 3",
    "INSERT INTO pb VALUES (6, 'f')",
]
# pt's first EXCHANGE crashes after its rows moved, before its checkpoint: a run more each.
MERGE_RUNS = 6


def crash_pt_exchange() -> Callable[[str, object], None]:
    """A failpoint action: raise at pt's second DDL commit point (its CREATE is the first)."""
    calls = []

    def action(name: str, owner: object) -> None:
        if str(owner).endswith("/pt"):
            calls.append(owner)
            if len(calls) == 2:
                raise RuntimeError("injected crash before pt's EXCHANGE commit")

    return action


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_swapped_and_exchanged_tables_replicate_and_verify(spark, tmp_path):
    from tidelake.merge.merge_log import MergeStatus  # pyspark: imported by this Spark test only
    from tidelake.verify.verifier import Verdict  # pyspark, as above

    script = SWAP + EXCHANGE + EXCHANGE_OUTSIDE + COLLAPSE + REORGANIZE + PARTITION_BY
    layout, reports, verified = replicate_and_verify(spark, tmp_path, DB, script, MERGE_RUNS,
                                                     (["ddl_apply.before_commit"], crash_pt_exchange()))
    outcomes = [(t.table, t.status, t.reason) for r in reports for t in r.tables]
    failed = [(t.table, t.status) for r in reports for t in r.failed]
    assert failed == [(f"{DB}.pt", MergeStatus.ERROR)], outcomes  # the injected crash only
    assert all(t.status not in (MergeStatus.BLOCKED, MergeStatus.ERROR) for t in reports[-1].tables), outcomes
    assert verified.ok, [(v.table, v.status, v.note, v.diffs[:2]) for v in verified.tables]
    tables = {v.table: v for v in verified.tables}
    assert set(tables) == {f"{DB}.{t}" for t in ("live", "shadow", "pt", "nt", "ept", "ont", "hp", "rr", "lr",
                                                 "pb")}
    assert all(v.status == Verdict.MATCH for v in tables.values())
    counts = {t: (v.upstream_rows, v.replica_rows) for t, v in tables.items()}
    assert counts[f"{DB}.live"] == (3, 3) and counts[f"{DB}.shadow"] == (2, 2)
    assert counts[f"{DB}.pt"] == (5, 5) and counts[f"{DB}.nt"] == (3, 3)  # pt: 1, 2, 11, 15, 25; nt: 3, 5, 7
    assert counts[f"{DB}.ept"] == (4, 4) and counts[f"{DB}.ont"] == (2, 2)  # ept: 4, 5, 6, 30; ont: 8, 9
    assert counts[f"{DB}.hp"] == (4, 4)
    assert counts[f"{DB}.rr"] == (6, 6) and counts[f"{DB}.lr"] == (6, 6) and counts[f"{DB}.pb"] == (5, 5)
    stopped = [(t.table, t.reason) for r in reports for t in r.tables if t.status == MergeStatus.STOPPED]
    assert not stopped, stopped
    names = sorted(f"{e.db}.{e.name}" for e in read_entries(layout).values())
    assert names == sorted(tables)  # no replica left under an intermediate name


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_one_run_takes_both_tables_of_an_exchange_past_it_whichever_reaches_it_first(spark, tmp_path):
    """One table at a time, pt first: pt reaches the EXCHANGE before nt has a replica, so it waits
    for nt; nt then applies the EXCHANGE, and pt goes again in the same run (a syncpoint's merge
    or the nemesis's final merge is one run: nemesis seed 9206)."""
    from tidelake.merge.merge_log import MergeStatus  # pyspark: imported by this Spark test only
    from tidelake.verify.verifier import Verdict  # pyspark, as above

    _, reports, verified = replicate_and_verify(spark, tmp_path, "once", EXCHANGE[:5], merge_runs=1, threads=1)
    (report,) = reports
    tables = {t.table: t for t in report.tables}
    assert [t.status for t in tables.values()] == [MergeStatus.MERGED] * 2, [(t.table, t.reason) for t in tables.values()]
    assert tables["once.pt"].ddls_applied == 2 and tables["once.nt"].ddls_applied == 2  # CREATE, EXCHANGE
    assert [v.status for v in verified.tables] == [Verdict.MATCH] * 2, [(v.table, v.note) for v in verified.tables]
