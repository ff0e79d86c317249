"""SELECT good enough to check results: point and range reads, aggregates, stale reads AS OF."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pymysql
import pytest

from tests.sim.sql.conftest import run


def test_point_range_count_and_order(db):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(8), n INT)")
    run(cursor, "INSERT INTO t VALUES " + ", ".join(f"({i}, 'v{i}', {i % 3})" for i in range(1, 21)))
    assert run(cursor, "SELECT v FROM t WHERE id = 7") == (("v7",),)
    assert run(cursor, "SELECT id FROM t WHERE id IN (3, 30, 5) ORDER BY id") == ((3,), (5,))
    assert run(cursor, "SELECT COUNT(*) FROM t WHERE id > 10 AND id <= 15") == ((5,),)
    assert run(cursor, "SELECT n, COUNT(*) FROM t GROUP BY n ORDER BY n") == ((0, 6), (1, 7), (2, 7))
    assert run(cursor, "SELECT id FROM t WHERE v LIKE 'v1%' ORDER BY id DESC LIMIT 2") == ((19,), (18,))
    assert run(cursor, "SELECT MAX(id), MIN(v), SUM(n) FROM t") == ((20, "v1", 21),)


def test_as_of_timestamp_reads_the_past(db):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    run(cursor, "INSERT INTO t VALUES (1, 1)")
    time.sleep(0.05)
    then = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")  # TiDB takes fractional seconds
    time.sleep(0.05)
    run(cursor, "UPDATE t SET v = 2 WHERE id = 1")
    run(cursor, "INSERT INTO t VALUES (2, 2)")
    assert run(cursor, f"SELECT id, v FROM t AS OF TIMESTAMP '{then}' ORDER BY id") == ((1, 1),)
    assert run(cursor, "SELECT id, v FROM t ORDER BY id") == ((1, 2), (2, 2))
    run(cursor, "BEGIN")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, f"SELECT * FROM t AS OF TIMESTAMP '{then}'")
    assert err.value.args[0] == 8135


def test_joins_are_refused_by_name(db):
    _, cursor = db
    run(cursor, "CREATE TABLE a (id INT PRIMARY KEY)")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "SELECT * FROM a x JOIN a y ON x.id = y.id")
    assert err.value.args[0] == 1235 and "JOIN" in err.value.args[1]
