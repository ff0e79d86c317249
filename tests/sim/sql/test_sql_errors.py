"""Bad input answers the MySQL error TiDB answers, and leaves nothing half-written."""

from __future__ import annotations

import pymysql
import pytest

from tests.sim.sql.conftest import run


@pytest.mark.parametrize("statement, code", [
    ("SELEC * FROM t", 1064),
    ("INSERT INTO t VALUES (1,", 1064),
    ("SELECT * FROM missing", 1146),
    ("INSERT INTO t (id, n) VALUES (1, 1)", 1062),
    ("INSERT INTO t (id, n) VALUES (2, 'many')", 1366),
    ("INSERT INTO t (id, n) VALUES (2, 99999999999)", 1264),
    ("INSERT INTO t (id, s) VALUES (2, 'far too long')", 1406),
    ("INSERT INTO t (id, d) VALUES (2, '2024-13-01')", 1292),
    ("INSERT INTO t (id, n) VALUES (NULL, 1)", 1048),
    ("INSERT INTO t (id, nope) VALUES (2, 1)", 1054),
    ("INSERT INTO t VALUES (2)", 1136),
    ("CREATE TABLE t (x INT)", 1050),
    ("CREATE TABLE v2 (a INT, a INT)", 1060),
    ("ALTER TABLE t ADD PRIMARY KEY (n) CLUSTERED", 8200),
    ("CREATE VIEW v AS SELECT 1", 1235),
    ("LOCK TABLES t READ", 1235),
    ("CREATE TABLE ci (k VARCHAR(8) COLLATE utf8mb4_general_ci PRIMARY KEY CLUSTERED)", 1235),
    ("SAVEPOINT s; ROLLBACK TO s", 1305),
])
def test_bad_statements_answer_tidbs_error_codes(db, statement, code):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, n INT, s VARCHAR(4), d DATE)")
    run(cursor, "INSERT INTO t (id, n) VALUES (1, 1)")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, statement)
    assert err.value.args[0] == code, err.value.args


def test_a_failed_statement_leaves_nothing_half_written(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(3))")
    run(cursor, "INSERT INTO t VALUES (1, 'a'), (2, 'bbb')")
    with pytest.raises(pymysql.err.MySQLError):
        run(cursor, "INSERT INTO t VALUES (3, 'c'), (4, 'toolong')")
    with pytest.raises(pymysql.err.MySQLError):
        run(cursor, "UPDATE t SET v = CONCAT(v, 'x') ORDER BY id")  # row 1 fits, row 2 does not
    assert sorted(server.tidb.select_all(name, "t"), key=lambda r: r["id"]) == [{"id": 1, "v": "a"},
                                                                                 {"id": 2, "v": "bbb"}]
    cluster = server.tidb.cluster
    assert cluster.mvcc.scan_locks(b"", b"", cluster.tso.next()) == []


def test_errors_keep_their_sqlstate(db):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY)")
    run(cursor, "INSERT INTO t VALUES (1)")
    with pytest.raises(pymysql.err.IntegrityError) as err:  # pymysql picks the class from the code
        run(cursor, "INSERT INTO t VALUES (1)")
    assert err.value.args == (1062, "Duplicate entry '1' for key 't.PRIMARY'")
