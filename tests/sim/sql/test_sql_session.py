"""The SQL front's sessions: connect-time variables, USE, transactions, OK-packet counts, and a
client that disconnects mid-transaction."""

from __future__ import annotations

import pymysql
import pytest

from tests.sim.sql.conftest import run


def test_connect_answers_version_variables_and_databases(connect):
    cursor = connect().cursor()
    assert run(cursor, "SELECT @@version, @@tidb_txn_mode, @@autocommit")[0][0].startswith("8.0.11-TiDB-v8.5.0")
    run(cursor, "SET NAMES utf8mb4")
    run(cursor, "SET SESSION sql_mode = 'STRICT_TRANS_TABLES'")
    run(cursor, "SET @@session.tidb_txn_mode = 'optimistic', time_zone = '+08:00'")
    assert run(cursor, "SELECT @@sql_mode, @@tidb_txn_mode, @@time_zone") == (("STRICT_TRANS_TABLES", "optimistic", "+08:00"),)
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "SET no_such_variable = 1")
    assert err.value.args[0] == 1193
    assert ("mysql",) in run(cursor, "SHOW DATABASES")


def test_use_and_an_unknown_database(connect, db):
    name, _ = db
    cursor = connect(db=name).cursor()
    assert run(cursor, "SELECT DATABASE()") == ((name,),)
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "USE nowhere")
    assert err.value.args[0] == 1049
    plain = connect().cursor()
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(plain, "CREATE TABLE t (a INT)")
    assert err.value.args[0] == 1046  # no database selected


def test_create_and_drop_database_with_and_without_if_exists(connect):
    cursor = connect().cursor()
    run(cursor, "CREATE DATABASE gone")
    run(cursor, "CREATE DATABASE IF NOT EXISTS gone")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "CREATE DATABASE gone")
    assert err.value.args[0] == 1007
    run(cursor, "USE gone")
    run(cursor, "DROP DATABASE gone")
    assert run(cursor, "SELECT DATABASE()") == ((None,),)
    run(cursor, "DROP DATABASE IF EXISTS gone")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "DROP SCHEMA gone")
    assert err.value.args[0] == 1008


def test_ok_packets_carry_affected_rows_and_the_insert_id(db):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
    assert cursor.execute("INSERT INTO t (v) VALUES (1), (2), (3)") == 3
    assert cursor.lastrowid == 1
    assert cursor.execute("UPDATE t SET v = v + 1 WHERE id >= 2") == 2
    assert cursor.execute("UPDATE t SET v = 1 WHERE id = 1") == 0  # matched, not changed
    assert cursor.execute("DELETE FROM t WHERE id = 3") == 1


def test_begin_commit_rollback_and_autocommit_off(connect, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY)")
    other = connect(db=name).cursor()
    run(cursor, "BEGIN")
    run(cursor, "INSERT INTO t VALUES (1)")
    assert run(other, "SELECT COUNT(*) FROM t") == ((0,),)  # not visible before COMMIT
    assert run(cursor, "SELECT COUNT(*) FROM t") == ((1,),)  # the transaction sees its own write
    run(cursor, "COMMIT")
    assert run(other, "SELECT COUNT(*) FROM t") == ((1,),)
    run(cursor, "START TRANSACTION")
    run(cursor, "INSERT INTO t VALUES (2)")
    run(cursor, "ROLLBACK")
    assert run(other, "SELECT id FROM t") == ((1,),)
    manual = connect(db=name, autocommit=False)
    manual.cursor().execute("INSERT INTO t VALUES (3)")
    assert run(other, "SELECT COUNT(*) FROM t") == ((1,),)
    manual.commit()
    assert run(other, "SELECT COUNT(*) FROM t") == ((2,),)


def test_savepoints_undo_part_of_a_transaction(db):
    _, cursor = db
    run(cursor, "CREATE TABLE sp (id INT PRIMARY KEY)")
    run(cursor, "SAVEPOINT outside")  # no transaction: nothing to remember
    run(cursor, "BEGIN")
    run(cursor, "INSERT INTO sp VALUES (1)")
    run(cursor, "SAVEPOINT a")
    run(cursor, "INSERT INTO sp VALUES (2)")
    run(cursor, "SAVEPOINT b")
    run(cursor, "INSERT INTO sp VALUES (3)")
    run(cursor, "ROLLBACK TO a")  # forgets b
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "ROLLBACK TO SAVEPOINT b")
    assert err.value.args[0] == 1305
    run(cursor, "INSERT INTO sp VALUES (4)")
    run(cursor, "RELEASE SAVEPOINT a")
    with pytest.raises(pymysql.err.MySQLError):
        run(cursor, "ROLLBACK TO a")
    run(cursor, "COMMIT")
    assert run(cursor, "SELECT id FROM sp ORDER BY id") == ((1,), (4,))


def test_a_failed_statement_in_a_transaction_is_undone_alone(db):
    _, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(3))")
    run(cursor, "BEGIN")
    run(cursor, "INSERT INTO t VALUES (1, 'a')")
    with pytest.raises(pymysql.err.MySQLError):
        run(cursor, "INSERT INTO t VALUES (2, 'b'), (3, 'toolong')")
    run(cursor, "COMMIT")
    assert run(cursor, "SELECT id, v FROM t") == ((1, "a"),)


def test_a_client_gone_mid_transaction_is_rolled_back(server, connect, db):
    name, cursor = db
    run(cursor, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    run(cursor, "INSERT INTO t VALUES (1, 0)")
    leaver = connect(db=name)
    leaver.cursor().execute("BEGIN")
    leaver.cursor().execute("UPDATE t SET v = 9 WHERE id = 1")  # holds a pessimistic lock on the row
    leaver.close()
    # the lock is gone: another session updates the row at once and nothing of the leaver stays
    assert cursor.execute("UPDATE t SET v = 5 WHERE id = 1") == 1
    assert run(cursor, "SELECT v FROM t WHERE id = 1") == ((5,),)
    assert server.tidb.cluster.mvcc.scan_locks(b"", b"", server.tidb.cluster.tso.next()) == []


def _prepare(conn: pymysql.Connection, sql: str) -> int:
    """COM_STMT_PREPARE by hand (pymysql has only the text protocol); the statement id."""
    conn._execute_command(0x16, sql)
    head = conn._read_packet()._data
    stmt_id, params = int.from_bytes(head[1:5], "little"), int.from_bytes(head[7:9], "little")
    for _ in range(params + 1 if params else 0):  # parameter definitions, then EOF
        conn._read_packet()
    return stmt_id


def _execute(conn: pymysql.Connection, stmt_id: int, values: list, send_types: bool) -> int:
    """COM_STMT_EXECUTE of BIGINT (int) and VAR_STRING (str) parameters; without types when send_types
    is False, as libmysqlclient sends every execution after the first. The affected rows."""
    body = stmt_id.to_bytes(4, "little") + b"\x00" + (1).to_bytes(4, "little") + bytes((len(values) + 7) // 8)
    types = b"".join(b"\xfd\x00" if isinstance(v, str) else b"\x08\x00" for v in values)
    body += b"\x01" + types if send_types else b"\x00"
    for v in values:
        if isinstance(v, str):
            raw = v.encode()
            body += bytes([len(raw)]) + raw  # length-encoded, under 251 bytes
        else:
            body += v.to_bytes(8, "little", signed=True)
    conn._next_seq_id = 0
    conn.write_packet(b"\x17" + body)
    packet = conn._read_packet()
    packet.advance(1)  # OK header
    return packet.read_length_encoded_integer()


def test_prepared_statements_reuse_the_types_sent_once(connect, db):
    name, cursor = db
    run(cursor, "CREATE TABLE ps (id BIGINT PRIMARY KEY, v BIGINT)")
    conn = connect(db=name)
    stmt = _prepare(conn, "INSERT INTO ps VALUES (?, ?)")
    assert _execute(conn, stmt, [1, 10], send_types=True) == 1
    assert _execute(conn, stmt, [2, 20], send_types=False) == 1
    assert run(cursor, "SELECT * FROM ps ORDER BY id") == ((1, 10), (2, 20))


def test_prepared_string_parameters_arrive_as_they_were_sent(connect, db):
    """mysql-mimic writes parameters into the statement text; quotes, backslashes, `"` and `?` in a
    value must not change the statement (tidelake/sim/sql/prepared.py)."""
    name, cursor = db
    run(cursor, "CREATE TABLE pstr (id BIGINT PRIMARY KEY, a VARCHAR(40), b VARCHAR(40))")
    conn = connect(db=name)
    stmt = _prepare(conn, "INSERT INTO pstr VALUES (?, ?, ?)")
    tricky = ["it's", 'say "hi" ?', "back\\slash", "`tick` ' ?"]
    for i, value in enumerate(tricky):
        assert _execute(conn, stmt, [i, value, value[::-1]], send_types=i == 0) == 1
    assert run(cursor, "SELECT a, b FROM pstr ORDER BY id") == tuple((v, v[::-1]) for v in tricky)

