"""`verify` of a replica waiting at a DROP PARTITION (tidelake.verify.verifier.as_held), end to
end: the merge is capped just below the job's barrier (a run that reaches the barrier applies the
DDL), so the replica still holds the dropped partition's rows, and so does the upstream at that ts
(the partition is listed under dropping_definitions, its rows intact); verify must scan it and find
the two equal, not report the rows as extra (as a verify racing a merge once did)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tests.sim.sql.front_replication import replicate_and_verify
from tidelake.codec.ddl_job import ActionType
from tidelake.lake.delta_read import read_delta
from tidelake.lake.layout import LakeLayout

DB = "barrier"

SCRIPT = [
    "CREATE TABLE m (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
    "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "INSERT INTO m VALUES (1, 1), (2, 2), (11, 11), (12, 12), (13, 13)",
    "ALTER TABLE m DROP PARTITION p1",
    "INSERT INTO m VALUES (3, 3)",
]


def below_drop_partition_barrier(layout: LakeLayout) -> int:
    """A ts below the DROP PARTITION's barrier (its commit ts - 1), read from the lake's `ddl` table."""
    rows = read_delta(DeltaTable(layout.ddl), ["commit_ts"], f"action = {int(ActionType.DROP_TABLE_PARTITION)}")
    (commit_ts,) = rows.column("commit_ts").to_pylist()
    return commit_ts - 2


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_replica_at_a_drop_partition_barrier_verifies(spark, tmp_path):
    from tidelake.verify.verifier import Verdict  # pyspark: imported by this Spark test only

    caps: list[int] = []

    def cap(layout: LakeLayout) -> int:
        caps.append(below_drop_partition_barrier(layout))
        return caps[0]

    _, reports, verified = replicate_and_verify(spark, tmp_path, DB, SCRIPT, cap=cap)
    assert not reports[-1].failed, [(t.table, t.status, t.reason) for t in reports[-1].tables]
    (verdict,) = verified.tables
    assert verdict.checkpoint == caps[0], "the replica must wait below the barrier for this test to mean anything"
    assert verdict.status == Verdict.MATCH, (verdict.note, verdict.diffs[:3])
    assert (verdict.upstream_rows, verdict.replica_rows) == (5, 5)  # p1's three rows are still there
