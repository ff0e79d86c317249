"""Lossy MODIFY COLUMN under a non-strict sql_mode (issue #28 item 2), sent as SQL through the
front, pulled, merged and compared with the upstream at the checkpoint by `verify`: TiDB clamps
integers into a narrower or unsigned type and truncates strings into a shorter VARCHAR while it
rewrites every row under the column's new id; the replica takes TiDB's values from the puller's
read at the job's finished ts, not from Spark's cast (docs/sql-front.md#what-the-replica-side-does).
Rows deleted before the job stay gone, DML after it lands on top, a widening keeps the plain path."""

from __future__ import annotations

import pytest

from tests.sim.sql.front_replication import replicate_and_verify

DB = "lossy"

NARROWING = [
    "SET sql_mode = ''",
    "CREATE TABLE amounts (id INT PRIMARY KEY, big BIGINT, label VARCHAR(10), delta INT, note VARCHAR(12))",
    "INSERT INTO amounts VALUES (1, 5, 'short', 3, 'kept'), (2, 1000, 'overlong', -4, 'x'), "
    "(3, -99999, 'abcdefghij', -2147483648, NULL), (4, NULL, NULL, NULL, 'gone')",
    "DELETE FROM amounts WHERE id = 4",
    "ALTER TABLE amounts MODIFY COLUMN big TINYINT",  # 1000 -> 127, -99999 -> -128: Spark's CAST fails
    "ALTER TABLE amounts MODIFY COLUMN label VARCHAR(3)",  # 'overlong' -> 'ove': Spark keeps the string
    "ALTER TABLE amounts MODIFY COLUMN delta INT UNSIGNED",  # -4 -> 0: Spark keeps -4 in a wider type
    "INSERT INTO amounts VALUES (5, 100, 'new', 7, 'after')",
    "UPDATE amounts SET big = 1, label = 'upd' WHERE id = 2",
    "ALTER TABLE amounts MODIFY COLUMN note VARCHAR(40)",  # widening: same column id, nothing rewritten
    "DELETE FROM amounts WHERE id = 3",
    "INSERT INTO amounts VALUES (3, -1, 'back', 0, 'again')",
]
# A lossy change inside a multi-schema change, beside an added column.
MULTI = [
    "CREATE TABLE parts (id INT PRIMARY KEY, qty INT, code VARCHAR(8))",
    "INSERT INTO parts VALUES (1, 100000, 'ABCDEFGH'), (2, -5, 'AB'), (3, 12, NULL)",
    "ALTER TABLE parts MODIFY COLUMN qty SMALLINT UNSIGNED, MODIFY COLUMN code VARCHAR(4), ADD COLUMN w INT DEFAULT 7",
    "UPDATE parts SET qty = qty + 1 WHERE id = 3",
]


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_lossy_modify_column_replicates_tidbs_converted_values(spark, tmp_path):
    from tidelake.merge.merge_log import MergeStatus  # pyspark: imported by this Spark test only
    from tidelake.verify.verifier import Verdict  # pyspark, as above

    _, reports, verified = replicate_and_verify(spark, tmp_path, DB, NARROWING + MULTI)
    outcomes = [(t.table, t.status, t.reason) for r in reports for t in r.tables]
    assert all(t.status not in (MergeStatus.BLOCKED, MergeStatus.ERROR, MergeStatus.STOPPED)
               for r in reports for t in r.tables), outcomes
    tables = {v.table: v for v in verified.tables}
    assert set(tables) == {f"{DB}.amounts", f"{DB}.parts"}
    assert verified.ok, [(v.table, v.status, v.note, v.diffs[:2]) for v in verified.tables]
    assert all(v.status == Verdict.MATCH for v in tables.values())
    counts = {t: (v.upstream_rows, v.replica_rows) for t, v in tables.items()}
    assert counts == {f"{DB}.amounts": (4, 4), f"{DB}.parts": (3, 3)}
