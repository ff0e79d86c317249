"""INSERT, REPLACE, UPDATE and DELETE through the SQL front, checked against the rows the front
itself reads back from the record keys."""

from __future__ import annotations

from decimal import Decimal

import pymysql
import pytest

from tests.sim.sql.conftest import run


def rows(server, db, table):
    return sorted(server.tidb.select_all(db, table), key=lambda r: tuple(str(v) for v in r.values()))


def test_insert_multi_row_ignore_and_on_duplicate_key_update(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, u VARCHAR(8), n INT DEFAULT 0, UNIQUE KEY uk (u))")
    assert cursor.execute("INSERT INTO t (id, u) VALUES (1, 'a'), (2, 'b')") == 2
    assert cursor.execute("INSERT IGNORE INTO t (id, u) VALUES (3, 'a'), (4, 'd')") == 1  # (3,'a') clashes on uk
    assert cursor.execute("INSERT INTO t (id, u) VALUES (2, 'z') ON DUPLICATE KEY UPDATE n = n + 10, "
                          "u = CONCAT(VALUES(u), u)") == 2
    assert cursor.execute("INSERT INTO t (id, u) VALUES (9, 'd') ON DUPLICATE KEY UPDATE n = n") == 0
    assert rows(server, name, "t") == [{"id": 1, "u": "a", "n": 0}, {"id": 2, "u": "zb", "n": 10},
                                       {"id": 4, "u": "d", "n": 0}]


def test_replace_deletes_every_row_it_clashes_with(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, u INT, UNIQUE KEY uk (u))")
    run(cursor, "INSERT INTO t VALUES (1, 10), (2, 20)")
    assert cursor.execute("REPLACE INTO t VALUES (1, 20)") == 3  # one inserted, two deleted
    assert rows(server, name, "t") == [{"id": 1, "u": 20}]


def test_update_and_delete_follow_where_order_by_and_limit(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, grp VARCHAR(4), v DECIMAL(6,2))")
    run(cursor, "INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'a', 3.5), (4, 'a', 4.5)")
    assert cursor.execute("UPDATE t SET v = v * 2 WHERE grp = 'a' AND v > 2 ORDER BY id DESC LIMIT 1") == 1
    assert cursor.execute("DELETE FROM t WHERE id IN (1, 2) OR v IS NULL") == 2
    assert cursor.execute("UPDATE t SET grp = 'c', v = v + 1 WHERE id BETWEEN 3 AND 10") == 2
    assert rows(server, name, "t") == [{"id": 3, "grp": "c", "v": Decimal("4.50")},
                                       {"id": 4, "grp": "c", "v": Decimal("10.00")}]


def test_a_primary_key_update_moves_the_row_and_no_pk_tables_keep_their_rowid(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE k (id INT PRIMARY KEY, v INT)")
    run(cursor, "CREATE TABLE n (a INT, b INT)")
    run(cursor, "INSERT INTO k VALUES (1, 1)")
    run(cursor, "INSERT INTO n VALUES (1, 1), (1, 1)")
    run(cursor, "UPDATE k SET id = 5 WHERE id = 1")
    assert cursor.execute("UPDATE n SET b = 2 WHERE a = 1 LIMIT 1") == 1
    assert rows(server, name, "k") == [{"id": 5, "v": 1}]
    assert sorted((r["b"], r["_tidb_rowid"]) for r in server.tidb.select_all(name, "n")) == [(1, 2), (2, 1)]


def test_a_row_moves_between_partitions_when_its_partition_column_changes(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE p (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (100))")
    run(cursor, "INSERT INTO p VALUES (1, 1)")
    run(cursor, "UPDATE p SET id = 50 WHERE id = 1")
    assert run(cursor, "SELECT id FROM p") == ((50,),)
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "INSERT INTO p VALUES (500, 1)")
    assert err.value.args[0] == 1526


def test_defaults_auto_increment_and_on_update_timestamps(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, d DATE DEFAULT '2024-01-31', "
                "at DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, s SET('x','y') DEFAULT 'y')")
    run(cursor, "INSERT INTO t () VALUES ()")
    run(cursor, "INSERT INTO t (id) VALUES (10)")
    run(cursor, "INSERT INTO t (d) VALUES (DEFAULT)")
    got = rows(server, name, "t")
    assert [r["id"] for r in sorted(got, key=lambda r: r["id"])] == [1, 10, 11]  # an explicit id rebases
    first = next(r for r in got if r["id"] == 1)
    run(cursor, "UPDATE t SET d = '2020-01-01' WHERE id = 1")
    changed = next(r for r in server.tidb.select_all(name, "t") if r["id"] == 1)
    assert (changed["s"], str(changed["d"])) == ("y", "2020-01-01") and changed["at"] >= first["at"]


def test_an_update_of_the_auto_increment_column_moves_the_allocator_past_it(db):
    """TiDB's updateRecord rebases AUTO_INCREMENT, so the next generated id does not collide."""
    _, cursor = db
    run(cursor, "CREATE TABLE ai (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
    run(cursor, "INSERT INTO ai (v) VALUES (1), (2), (3)")
    run(cursor, "UPDATE ai SET id = 10 WHERE id = 3")
    run(cursor, "INSERT INTO ai (v) VALUES (4)")
    assert run(cursor, "SELECT id FROM ai ORDER BY id") == ((1,), (2,), (10,), (11,))


def test_hex_and_bit_literals_are_binary_strings_and_numbers_by_column(db):
    _, cursor = db
    run(cursor, "CREATE TABLE lit (id INT PRIMARY KEY, n INT, b VARBINARY(8) DEFAULT b'01101110', "
                "bits BIT(10), r BLOB)")
    run(cursor, "INSERT INTO lit (id, n, bits, r) VALUES (1, x'0a', b'1000001', RANDOM_BYTES(4))")
    assert run(cursor, "SELECT n, b, bits + 0, LENGTH(r) FROM lit") == ((10, b"n", 65, 4),)
