"""DDL that moves rows between physical tables (issue #28 item 2), sent as SQL: the job rows TiDB
writes for it (action, args, binlog, table ids) and what a puller's schema tracker makes of them."""

from __future__ import annotations

import pymysql
import pytest

from tests.sim.sql.conftest import run
from tests.sim.sql.test_sql_ddl import jobs
from tidelake.capture.changefeed.ddl_puller import job_rows
from tidelake.codec.ddl_job import ActionType, JobState
from tidelake.codec.keys import decode_record_key, table_record_span
from tidelake.codec.schema import TableInfo
from tidelake.sim.tidb import partition as part
from tidelake.sim.tidb.kvtxn import snapshot_get, snapshot_scan
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import load_schema
from tidelake.upstream.schema_tracker import SchemaTracker

RANGED = ("CREATE TABLE pt (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), "
          "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)")


class _Reader:
    """The snapshot-reader surface load_schema needs, straight on the simulator's MVCC."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster

    def scan(self, start: bytes, end: bytes, ts: int):
        return snapshot_scan(self.cluster, start, end, ts)

    def get(self, key: bytes, ts: int):
        return snapshot_get(self.cluster, key, ts)


def tracker(tidb, name: str) -> SchemaTracker:
    reader = _Reader(tidb.cluster)
    return SchemaTracker(load_schema(reader, tidb.cluster.tso.next()), TableFilter.parse([f"{name}.*"]),
                         lambda ts: load_schema(reader, ts))


def now(tidb) -> int:
    """A ts after the job: history rows carry no finished ts (TiCDC takes the done row's commit ts)."""
    return tidb.cluster.tso.next()


def handles_at(tidb, physical_id: int) -> list[int]:
    span = table_record_span(physical_id)
    return [decode_record_key(k)[1] for k, _ in snapshot_scan(tidb.cluster, *span, tidb.cluster.tso.next())]


def test_exchange_partition_swaps_physical_ids_and_validates_rows(server, db):
    name, cursor = db
    tidb = server.tidb
    run(cursor, RANGED)
    run(cursor, "CREATE TABLE nt (id INT PRIMARY KEY, v INT)")
    run(cursor, "INSERT INTO pt VALUES (1, 1), (11, 11)")
    run(cursor, "INSERT INTO nt VALUES (5, 50)")
    pt, nt = tidb.table_info(name, "pt"), tidb.table_info(name, "nt")
    p0 = pt.partition.definitions[0].id
    feed = tracker(tidb, name)
    before = tidb.cluster.tso.next()
    run(cursor, "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE nt")
    (job,) = jobs(tidb, before)
    # pkg/ddl executor.go ExchangeTablePartition: the job is the normal table's, the binlog the partitioned one
    assert (job.type, job.table_id, job.table_info.id) == (ActionType.EXCHANGE_TABLE_PARTITION, nt.id, pt.id)
    assert job.raw_args == [p0, job.schema_id, pt.id, "p0", True]
    assert job.table_info.partition.definitions[0].id == nt.id
    assert tidb.table_info(name, "nt").id == p0
    assert handles_at(tidb, nt.id) == [5] and handles_at(tidb, p0) == [1]  # the keys stay, their owner changes
    assert run(cursor, "SELECT id FROM pt ORDER BY id") == ((5,), (11,))
    effect = feed.apply(job, now(tidb))
    assert not effect.joined and not effect.left
    assert feed.lookup(nt.id).table == "pt" and feed.lookup(p0).table == "nt"
    # one `ddl` row per table: nt's keyed by its id before the job, with its info after (id p0)
    rows = job_rows(job, now(tidb), effect)
    assert [(r.table_id, r.table_name, TableInfo.from_json(r.table_info).id) for r in rows] == [
        (pt.id, "pt", pt.id), (nt.id, "nt", p0)]

    run(cursor, "INSERT INTO nt VALUES (15, 0)")  # belongs in p1, not p0
    before = tidb.cluster.tso.next()
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE nt")
    assert err.value.args[0] == 1737
    assert [j.state for j in jobs(tidb, before)] == [JobState.ROLLBACK_DONE]
    assert tidb.table_info(name, "nt").id == p0
    run(cursor, "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE nt WITHOUT VALIDATION")
    assert jobs(tidb, before)[-1].raw_args[-1] is False
    assert run(cursor, "SELECT id FROM pt ORDER BY id") == ((1,), (11,), (15,))


def test_exchange_refuses_tables_of_another_shape(db):
    _, cursor = db
    run(cursor, RANGED)
    run(cursor, "CREATE TABLE other (id INT PRIMARY KEY, v BIGINT)")
    with pytest.raises(pymysql.err.MySQLError) as err:
        run(cursor, "ALTER TABLE pt EXCHANGE PARTITION p0 WITH TABLE other")
    assert err.value.args[0] == 1736


def test_reorganize_partition_copies_rows_to_new_partition_ids(server, db):
    name, cursor = db
    tidb = server.tidb
    run(cursor, RANGED)
    run(cursor, "INSERT INTO pt VALUES (1, 1), (12, 12), (18, 18), (25, 25)")
    old = {d.name: d.id for d in tidb.table_info(name, "pt").partition.definitions}
    feed = tracker(tidb, name)
    before = tidb.cluster.tso.next()
    run(cursor, "ALTER TABLE pt REORGANIZE PARTITION p1, p2 INTO (PARTITION p1a VALUES LESS THAN (15), "
                "PARTITION p1b VALUES LESS THAN (30), PARTITION pmax VALUES LESS THAN MAXVALUE)")
    (job,) = jobs(tidb, before)
    assert job.type == ActionType.REORGANIZE_PARTITION and job.table_id == job.table_info.id
    names, added = job.raw_args
    assert names == ["p1", "p2"] and [d["name"]["O"] for d in added["definitions"]] == ["p1a", "p1b", "pmax"]
    new = {d.name: d.id for d in job.table_info.partition.definitions}
    assert new["p0"] == old["p0"] and not {new["p1a"], new["p1b"]} & set(old.values())
    assert handles_at(tidb, new["p1a"]) == [12] and handles_at(tidb, new["p1b"]) == [18, 25]
    assert handles_at(tidb, old["p1"]) == [12, 18]  # left to TiDB's delete-range worker
    effect = feed.apply(job, now(tidb))
    assert set(effect.joined) == {new["p1a"], new["p1b"], new["pmax"]} and set(effect.left) == {old["p1"], old["p2"]}
    assert run(cursor, "SELECT COUNT(*) FROM pt") == ((4,),)


def test_partition_by_and_remove_partitioning_give_the_table_a_new_id(server, db):
    name, cursor = db
    tidb = server.tidb
    run(cursor, "CREATE TABLE h (id INT PRIMARY KEY, v INT)")
    run(cursor, "INSERT INTO h VALUES (1, 1), (2, 2), (3, 3)")
    plain = tidb.table_info(name, "h").id
    feed = tracker(tidb, name)
    before = tidb.cluster.tso.next()
    run(cursor, "ALTER TABLE h PARTITION BY HASH (id) PARTITIONS 2")
    (job,) = jobs(tidb, before)
    info = job.table_info
    assert (job.type, job.table_id) == (ActionType.ALTER_TABLE_PARTITIONING, plain) and info.id != plain
    assert job.raw_args[0] == ["pfulltable"] and job.raw_args[1]["new_table_id"] == info.id
    ids = [d.id for d in info.partition.definitions]
    assert [handles_at(tidb, i) for i in ids] == [[2], [1, 3]]
    effect = feed.apply(job, now(tidb))
    assert set(effect.joined) == set(ids) and set(effect.left) == {plain}

    before = tidb.cluster.tso.next()
    run(cursor, "ALTER TABLE h REMOVE PARTITIONING")
    (job,) = jobs(tidb, before)
    assert (job.type, job.table_id) == (ActionType.REMOVE_PARTITIONING, info.id)
    collapsed = job.raw_args[1]["definitions"][0]
    assert collapsed["name"]["O"] == "CollapsedPartitions" and collapsed["id"] == job.table_info.id
    assert job.table_info.partition is None and handles_at(tidb, job.table_info.id) == [1, 2, 3]
    effect = feed.apply(job, now(tidb))
    assert set(effect.joined) == {job.table_info.id} and set(effect.left) == set(ids)
    assert "PARTITION" not in run(cursor, "SHOW CREATE TABLE h")[0][1]


def test_a_transaction_spanning_a_repartitioning_is_refused(server, connect, db):
    name, cursor = db
    run(cursor, "CREATE TABLE r (id INT PRIMARY KEY, v INT)")
    open_txn = connect(name, autocommit=False).cursor()
    run(open_txn, "INSERT INTO r VALUES (1, 1)")
    run(cursor, "ALTER TABLE r PARTITION BY HASH (id) PARTITIONS 2")
    with pytest.raises(pymysql.err.MySQLError) as err:
        open_txn.connection.commit()
    assert err.value.args[0] == 8028
    assert run(cursor, "SELECT COUNT(*) FROM r") == ((0,),)


def test_primary_key_changes_keep_the_row_handle(server, db):
    """TiDB 8: ADD PRIMARY KEY is always non-clustered and a clustered one cannot be dropped
    (pkg/ddl executor.go CreatePrimaryKey, checkIsDropPrimaryKey), so the handle never changes."""
    name, cursor = db
    tidb = server.tidb
    run(cursor, "CREATE TABLE k (id INT, v INT, PRIMARY KEY (id) NONCLUSTERED)")
    run(cursor, "INSERT INTO k VALUES (7, 1)")
    table_id = tidb.table_info(name, "k").id
    handles = handles_at(tidb, table_id)
    before = tidb.cluster.tso.next()
    run(cursor, "ALTER TABLE k DROP PRIMARY KEY")
    run(cursor, "ALTER TABLE k ADD PRIMARY KEY (v)")
    assert [j.type for j in jobs(tidb, before)] == [ActionType.DROP_PRIMARY_KEY, ActionType.ADD_PRIMARY_KEY]
    assert handles_at(tidb, table_id) == handles
    run(cursor, "CREATE TABLE c (id INT PRIMARY KEY CLUSTERED)")
    for sql in ("ALTER TABLE c DROP PRIMARY KEY", "ALTER TABLE k DROP PRIMARY KEY, ADD PRIMARY KEY (id) CLUSTERED"):
        with pytest.raises(pymysql.err.MySQLError) as err:
            run(cursor, sql)
        assert err.value.args[0] == 8200


def test_rename_tables_swap_is_one_job_naming_each_pair_as_it_left_the_table(server, db):
    name, cursor = db
    tidb = server.tidb
    run(cursor, "CREATE TABLE a (id INT PRIMARY KEY)")
    run(cursor, "CREATE TABLE b (id INT PRIMARY KEY)")
    ids = {t: tidb.table_info(name, t).id for t in ("a", "b")}
    feed = tracker(tidb, name)
    before = tidb.cluster.tso.next()
    run(cursor, "RENAME TABLE a TO tmp, b TO a, tmp TO b")
    (job,) = jobs(tidb, before)
    assert job.type == ActionType.RENAME_TABLES
    # pkg/ddl onRenameTables appends each pair's table info: a's intermediate name comes first
    assert [(t.id, t.name) for t in job.multiple_table_infos] == [(ids["a"], "tmp"), (ids["b"], "a"), (ids["a"], "b")]
    feed.apply(job, now(tidb))
    assert (feed.lookup(ids["a"]).table, feed.lookup(ids["b"]).table) == ("b", "a")


def test_verify_reads_a_repartitioned_table_at_its_barrier_from_the_ids_the_replica_holds(server, db):
    """At a job's finished ts - 1, the replica's barrier, the table is in delete reorganization: its
    `definitions` already list the new partitions, which hold the copies. verify (as_held) reads the
    ids the replica was built from, which hold every row there; a first partitioning reads the
    unpartitioned table (docs/sql-front.md#what-the-replica-side-does, item 7)."""
    from tidelake.verify.verifier import as_held  # imports pyspark (no session is started)

    name, cursor = db
    tidb = server.tidb
    reader = _Reader(tidb.cluster)
    run(cursor, RANGED)
    run(cursor, "INSERT INTO pt VALUES (1, 1), (12, 12), (18, 18), (25, 25)")
    old = tidb.table_info(name, "pt").physical_ids()
    job = tidb.reorganize_partition(name, "pt", ["p1", "p2"], [("p1a", ["15"]), ("pmax", ["MAXVALUE"])])
    barrier = job.finished_ts - 1
    in_flight = _table(load_schema(reader, barrier), name, "pt")
    assert in_flight.partition.dropping_definitions and set(in_flight.physical_ids()) != set(old)
    assert as_held(in_flight).physical_ids() == old and _rows_at(tidb, old, barrier) == 4
    done = _table(load_schema(reader, job.finished_ts), name, "pt")
    assert as_held(done).physical_ids() == job.table_info.physical_ids()

    run(cursor, "CREATE TABLE h (id INT PRIMARY KEY, v INT)")
    run(cursor, "INSERT INTO h VALUES (1, 1), (2, 2)")
    plain = tidb.table_info(name, "h").id
    job = tidb.alter_partitioning(name, "h", part.spec_from_dict({"type": "hash", "column": "id", "count": 2}))
    held = as_held(_table(load_schema(reader, job.finished_ts - 1), name, "h"))
    assert held.physical_ids() == [plain] and held.partition is None
    assert _rows_at(tidb, [plain], job.finished_ts - 1) == 2


def _table(snapshot, db: str, name: str) -> TableInfo:
    return next(t for d, t in snapshot.tables_with_rows() if (d.name, t.name) == (db, name))


def _rows_at(tidb, physical_ids: list[int], ts: int) -> int:
    return sum(len(snapshot_scan(tidb.cluster, *table_record_span(pid), ts)) for pid in physical_ids)
