"""DDL through the SQL front: what CREATE/ALTER statements leave in the meta keys and the DDL job
rows (the statement's own text as the job's query), row routing of every partitioning kind,
generated columns, clustering and AUTO_RANDOM."""

from __future__ import annotations

import zlib
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pymysql
import pytest

from tests.sim.sql.conftest import run
from tidelake.codec import mysql_types as mt
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.keys import decode_record_key, table_record_span
from tidelake.codec.row import decode_row
from tidelake.codec.schema import STATE_PUBLIC
from tidelake.sim.tidb import system_tables as st
from tidelake.sim.tidb.catalog import Catalog
from tidelake.sim.tidb.kvtxn import snapshot_scan

ZOO = """CREATE TABLE zoo (
  id INT PRIMARY KEY, c_tiny TINYINT, c_small SMALLINT UNSIGNED, c_medium MEDIUMINT, c_big BIGINT UNSIGNED,
  c_float FLOAT, c_double DOUBLE, c_dec DECIMAL(30,10), c_date DATE, c_dt DATETIME(6), c_ts TIMESTAMP(3),
  c_time TIME(2), c_year YEAR, c_bit BIT(12), c_json JSON, c_char CHAR(8), c_varchar VARCHAR(64),
  c_bin BINARY(4), c_varbin VARBINARY(16), c_text TEXT, c_blob BLOB, c_enum ENUM('red','green','blue'),
  c_set SET('a','b','c','d'), c_vec VECTOR(3))"""


def jobs(tidb, since_ts: int = 0) -> list:
    """Finished DDL jobs from the history table, in job order."""
    out = []
    for key, value in snapshot_scan(tidb.cluster, *table_record_span(st.DDL_HISTORY_TABLE_ID), tidb.cluster.tso.next()):
        row = decode_row(value, st.ddl_history_table(), decode_record_key(key)[1])
        job = DDLJob.from_json(row["job_meta"])
        if job.start_ts > since_ts:
            out.append(job)
    return sorted(out, key=lambda j: j.id)


def test_every_type_of_the_zoo_round_trips(server, db):
    name, cursor = db
    run(cursor, ZOO)
    run(cursor, "INSERT INTO zoo VALUES (1, -128, 65535, -8388608, 18446744073709551615, 1.5, -2.25e10, "
                "'12345678901234567890.0123456789', '2024-02-29', '2024-01-02 03:04:05.123456', "
                "'2024-01-02 03:04:05.1234', '-838:59:58.5', 2155, b'101010101010', '{\"k\": [1, 2]}', 'ab  ', "
                "'héllo 東京', x'0001', x'ff00ff', 'text', x'00ff', 'GREEN', 'd,a', '[1,2,3]')")
    row = server.tidb.select_all(name, "zoo")[0]
    assert row == {
        "id": 1, "c_tiny": -128, "c_small": 65535, "c_medium": -8388608, "c_big": 18446744073709551615,
        "c_float": 1.5, "c_double": -2.25e10, "c_dec": Decimal("12345678901234567890.0123456789"),
        "c_date": date(2024, 2, 29), "c_dt": datetime(2024, 1, 2, 3, 4, 5, 123456),
        "c_ts": datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=timezone.utc),
        "c_time": -timedelta(hours=838, minutes=59, seconds=58, microseconds=500000),
        "c_year": 2155, "c_bit": 0b101010101010, "c_json": {"k": [1, 2]}, "c_char": "ab",
        "c_varchar": "héllo 東京", "c_bin": b"\x00\x01\x00\x00", "c_varbin": b"\xff\x00\xff", "c_text": "text",
        "c_blob": b"\x00\xff", "c_enum": "green", "c_set": "a,d", "c_vec": [1.0, 2.0, 3.0]}
    info = server.tidb.table_info(name, "zoo")
    assert {c.name: mt.TYPE_NAMES[c.field_type.tp] for c in info.columns}["c_vec"] == "vector"


def test_create_table_job_keeps_the_statement_and_the_meta_table_info(server, db):
    name, cursor = db
    before = server.tidb.cluster.tso.next()
    sql = ("CREATE TABLE t (id BIGINT NOT NULL AUTO_INCREMENT COMMENT 'key', v VARCHAR(10) DEFAULT 'x', "
           "PRIMARY KEY (id) /*T![clustered_index] NONCLUSTERED */, KEY iv (v)) COMMENT = 'tbl'")
    run(cursor, sql)
    (job,) = jobs(server.tidb, before)
    assert (job.type, job.state, job.query) == (ActionType.CREATE_TABLE, JobState.SYNCED, sql)
    info = server.tidb.table_info(name, "t")
    assert job.table_info.to_json() == info.to_json()
    assert not info.pk_is_handle and not info.is_common_handle  # NONCLUSTERED: rows keyed by _tidb_rowid
    assert [i.name for i in info.indices] == ["PRIMARY", "iv"] and info.comment == "tbl"


def test_clustering_follows_tidb_enable_clustered_index(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE c (a VARCHAR(8), b INT, PRIMARY KEY (a, b))")  # ON: clustered common handle
    run(cursor, "SET tidb_enable_clustered_index = 'INT_ONLY'")
    run(cursor, "CREATE TABLE n (a VARCHAR(8), b INT, PRIMARY KEY (a, b))")
    run(cursor, "CREATE TABLE i (a INT PRIMARY KEY)")
    infos = {t: server.tidb.table_info(name, t) for t in ("c", "n", "i")}
    assert (infos["c"].is_common_handle, infos["n"].is_common_handle, infos["i"].pk_is_handle) == (True, False, True)


def test_generated_columns_store_or_compute(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE g (id INT PRIMARY KEY, a INT, s INT AS (a * 2) STORED, v INT AS (a + 1) VIRTUAL)")
    run(cursor, "INSERT INTO g (id, a) VALUES (1, 20)")
    run(cursor, "UPDATE g SET a = 5 WHERE id = 1")
    assert run(cursor, "SELECT s, v FROM g") == ((10, 6),)
    stored = server.tidb.select_all(name, "g")[0]
    assert stored == {"id": 1, "a": 5, "s": 10}  # a virtual column is never stored in the row
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "INSERT INTO g (id, a, s) VALUES (2, 1, 1)")
    assert err.value.args[0] == 3105


def test_auto_random_ids_carry_shard_bits(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE r (id BIGINT PRIMARY KEY AUTO_RANDOM(4), v INT)")
    run(cursor, "INSERT INTO r (v) VALUES (1), (2)")
    ids = [row["id"] for row in server.tidb.select_all(name, "r")]
    assert len(set(ids)) == 2 and all(0 < i < 1 << 63 for i in ids)
    assert {i & ((1 << 59) - 1) for i in ids} == {1, 2}  # the incremental part below the 4 shard bits
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "CREATE TABLE bad (id INT PRIMARY KEY AUTO_RANDOM)")
    assert err.value.args[0] == 8216


@pytest.mark.parametrize("partitioning, rows, expected", [
    ("PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
     [1, 25], {"p0": [1], "p1": [25]}),
    ("PARTITION BY LIST (id) (PARTITION odd VALUES IN (1, 3), PARTITION even VALUES IN (2, 4))",
     [1, 2, 3], {"odd": [1, 3], "even": [2]}),
    ("PARTITION BY HASH (id) PARTITIONS 3", [3, 4, -5], {"p0": [3], "p1": [4], "p2": [-5]}),
    ("PARTITION BY RANGE COLUMNS (id) (PARTITION a VALUES LESS THAN (5), PARTITION b VALUES LESS THAN (MAXVALUE))",
     [4, 5], {"a": [4], "b": [5]}),
    ("PARTITION BY RANGE (id DIV 10) (PARTITION low VALUES LESS THAN (1), PARTITION high VALUES LESS THAN (9))",
     [9, 10], {"low": [9], "high": [10]}),
])
def test_rows_land_in_the_partition_tidb_routes_them_to(server, db, partitioning, rows, expected):
    name, cursor = db
    run(cursor, f"CREATE TABLE p (id INT PRIMARY KEY, v INT) {partitioning}")
    run(cursor, "INSERT INTO p (id) VALUES " + ", ".join(f"({r})" for r in rows))
    info = server.tidb.table_info(name, "p")
    found = {}
    for defn in info.partition.definitions:
        pairs = snapshot_scan(server.tidb.cluster, *table_record_span(defn.id), server.tidb.cluster.tso.next())
        found[defn.name] = sorted(decode_record_key(k)[1] for k, _ in pairs)
    assert {k: v for k, v in found.items() if v} == expected


def test_key_partitioning_hashes_by_crc32_of_the_values(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE k (id INT PRIMARY KEY) PARTITION BY KEY (id) PARTITIONS 4")
    run(cursor, "INSERT INTO k VALUES (7)")
    info = server.tidb.table_info(name, "k")
    expected = info.partition.definitions[zlib.crc32(b"7") % 4].id  # Datum.ToHashKey of int 7 is "7"
    assert snapshot_scan(server.tidb.cluster, *table_record_span(expected), server.tidb.cluster.tso.next())


def test_create_table_like_copies_the_definition_under_new_ids(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE src (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 2")
    run(cursor, "CREATE TABLE dst LIKE src")
    src, dst = server.tidb.table_info(name, "src"), server.tidb.table_info(name, "dst")
    assert [c.name for c in dst.columns] == ["id", "v"] and len(dst.partition.definitions) == 2
    assert not set(src.physical_ids()) & set(dst.physical_ids()) and dst.id != src.id


def test_alter_with_several_actions_is_one_multi_schema_change_job(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE m (id INT PRIMARY KEY, a INT, b VARCHAR(5))")
    run(cursor, "INSERT INTO m VALUES (1, 10, 'x')")
    before = server.tidb.cluster.tso.next()
    sql = "ALTER TABLE m ADD COLUMN c INT DEFAULT 3 FIRST, DROP COLUMN a, ADD INDEX ib (b), MODIFY b VARCHAR(20)"
    run(cursor, sql)
    (job,) = jobs(server.tidb, before)
    assert job.type == ActionType.MULTI_SCHEMA_CHANGE and job.query == sql
    subs = job.raw["multi_schema_info"]["sub_jobs"]
    assert [s["type"] for s in subs] == [ActionType.ADD_COLUMN, ActionType.DROP_COLUMN, ActionType.ADD_INDEX,
                                          ActionType.MODIFY_COLUMN]
    assert all(s["state"] == JobState.DONE for s in subs)
    assert run(cursor, "SELECT * FROM m") == ((3, 1, "x"),)
    assert [c.name for c in job.table_info.public_columns()] == ["c", "id", "b"]


def test_a_multi_schema_change_makes_nothing_public_before_every_change_is_past_its_revertible_state(
        server, db, monkeypatch):
    """pkg/ddl `onMultiSchemaChange`: the new column goes public only once the new index has been
    backfilled (it exists, not public), and the index goes public after the column."""
    name, cursor = db
    run(cursor, "CREATE TABLE p (id INT PRIMARY KEY, v INT)")
    written = []
    put_table = Catalog.put_table

    def recording(self, txn, db_id, info, old_name=None):
        if info.name == "p":
            column, index = info.column_by_name("c"), next((i for i in info.indices if i.name == "iv"), None)
            written.append((column and column.state, index and index.state))
        return put_table(self, txn, db_id, info, old_name)

    monkeypatch.setattr(Catalog, "put_table", recording)
    run(cursor, "ALTER TABLE p ADD COLUMN c INT, ADD INDEX iv (v)")
    column_public = next(n for n, (column, _) in enumerate(written) if column == STATE_PUBLIC)
    index_public = next(n for n, (_, index) in enumerate(written) if index == STATE_PUBLIC)
    assert written[column_public][1] is not None, written
    assert column_public < index_public == len(written) - 1, written


def test_a_lossy_modify_column_rewrites_rows_and_a_failing_one_changes_nothing(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE w (id INT PRIMARY KEY, v VARCHAR(10))")
    run(cursor, "INSERT INTO w VALUES (1, '42'), (2, '300')")
    old_id = server.tidb.table_info(name, "w").column_by_name("v").id
    run(cursor, "ALTER TABLE w MODIFY v INT")
    info = server.tidb.table_info(name, "w")
    assert info.column_by_name("v").id != old_id  # TiDB's changing column took the old one's place
    assert sorted(r["v"] for r in server.tidb.select_all(name, "w")) == [42, 300]
    before = server.tidb.cluster.tso.next()
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "ALTER TABLE w MODIFY v TINYINT")  # 300 does not fit: the job rolls back
    assert err.value.args[0] == 1264
    assert server.tidb.table_info(name, "w").column_by_name("v").field_type.tp == mt.TYPE_LONG
    assert sorted(r["v"] for r in server.tidb.select_all(name, "w")) == [42, 300]
    assert [j.state for j in jobs(server.tidb, before)] == [JobState.ROLLBACK_DONE]


def test_unsigned_floats_and_json_not_null_columns(server, db):
    name, cursor = db
    run(cursor, "CREATE TABLE uf (id INT PRIMARY KEY, f FLOAT UNSIGNED NULL, d DOUBLE(10,2) UNSIGNED)")
    run(cursor, "INSERT INTO uf VALUES (1, 1.5, 2.25)")
    run(cursor, "ALTER TABLE uf ADD COLUMN j JSON NOT NULL")  # existing rows read JSON null
    columns = {c.name: c for c in server.tidb.table_info(name, "uf").columns}
    assert columns["f"].field_type.tp == mt.TYPE_FLOAT and columns["f"].field_type.flag & mt.UNSIGNED_FLAG
    assert columns["d"].field_type.flag & mt.UNSIGNED_FLAG and columns["j"].origin_default == "null"
    assert run(cursor, "SELECT f, d FROM uf") == ((1.5, 2.25),)
