"""The rows a REORGANIZE PARTITION copied into new partition ids land as puts at the job's finished
ts before its `ddl` row (tidelake.capture.changefeed.copied_rows), also across a puller crash
between the two: the restarted puller pulls the job again and lands the same puts once more (the
merge collapses equal (key, commit ts) changes), nothing lost. The oracle is the simulator's own
MVCC read of the new ids at the finished ts, never the snapshot reader under test."""

from __future__ import annotations

from collections import Counter

import pymysql

from tests.capture.pull_harness import changelog, ddl_rows, make_config, oracle, small_sim, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.codec.ddl_job import ActionType
from tidelake.codec.keys import table_record_span
from tidelake.nemesis.puller_crash import CrashSwitch
from tidelake.sim.sql.server import SqlServer
from tidelake.sim.tidb.kvtxn import snapshot_scan
from tidelake.sim.tidb.session import SimTiDB
from tidelake.table_filter import TableFilter
from tidelake.wait import wait_until


def test_copied_rows_land_at_the_finished_ts_again_after_a_crash_before_the_ddl_row(tmp_path):
    lake = tmp_path / "lake"
    switch = CrashSwitch()
    with small_sim() as sim, switch.armed():
        tidb = SimTiDB(sim)
        config = make_config(sim, lake, rules=("shop.*",), flush="200ms")
        with SqlServer(tidb, port=0) as server:
            conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
            cursor = conn.cursor()
            first = PullerThread(config, progress_interval_s=3600).start()
            wait_resolved(lake, {}, 1, first)
            for statement in (
                "CREATE DATABASE shop", "USE shop",
                "CREATE TABLE pt (id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
                "(PARTITION p0 VALUES LESS THAN (10), PARTITION pmax VALUES LESS THAN MAXVALUE)",
                "INSERT INTO pt VALUES (1, 1), (12, 12), (25, 25), (40, 40)",
            ):
                cursor.execute(statement)
            wait_resolved(lake, {}, sim.tso.next(), first)
            before = set(tidb.table_info("shop", "pt").physical_ids())
            switch.crash_at("lander.before_ddl")  # the next DDL row is the REORGANIZE's
            cursor.execute("ALTER TABLE pt REORGANIZE PARTITION pmax INTO (PARTITION p1 VALUES LESS THAN (30), "
                           "PARTITION pmax VALUES LESS THAN MAXVALUE)")
            wait_until(switch.crashed.is_set, 40, "the crash before the REORGANIZE's ddl row")
            first.stop()
            assert not [r for r in ddl_rows(lake) if r["action"] == ActionType.REORGANIZE_PARTITION]
            new_ids = sorted(set(tidb.table_info("shop", "pt").physical_ids()) - before)
            with PullerThread(config, progress_interval_s=3600) as second:
                cursor.execute("INSERT INTO pt VALUES (26, 26), (50, 50)")
                cursor.execute("UPDATE pt SET v = 0 WHERE id = 12")
                final = sim.tso.next()
                ids = tidb.physical_ids(TableFilter.parse(["shop.*"]))
                wait_resolved(lake, dict.fromkeys(ids, final), final, second)
            conn.close()
        (job,) = [r for r in ddl_rows(lake) if r["action"] == ActionType.REORGANIZE_PARTITION]
        finished = job["commit_ts"]
        landed = changelog(lake)
        for pid in new_ids:
            copies = Counter((key, value) for table, key, ts, op, value in landed
                             if table == pid and ts == finished and op == "put")
            at_finish = dict(snapshot_scan(sim, *table_record_span(pid), finished))
            assert set(copies) == set(at_finish.items()) and set(copies.values()) == {2}, pid
            after = {(t, k, ts, op, v) for t, k, ts, op, v in landed if t == pid and ts > finished}
            assert after == oracle(sim, pid, finished), pid
        assert len(new_ids) == 2  # p1 holds 12 and 25, the new pmax 40: each copied once, landed twice


def test_a_reorganising_modify_column_lands_every_row_at_the_finished_ts_and_a_widening_none(tmp_path):
    """A MODIFY COLUMN that gives the column a new id (TiDB rewrote every row, here clamping under a
    non-strict sql_mode) lands the table's rows at its finished ts, as TiDB's MVCC holds them there;
    a VARCHAR widening keeps the column id and lands nothing at its ts."""
    lake = tmp_path / "lake"
    with small_sim() as sim:
        tidb = SimTiDB(sim)
        config = make_config(sim, lake, rules=("shop.*",), flush="200ms")
        with SqlServer(tidb, port=0) as server, PullerThread(config, progress_interval_s=3600) as puller:
            conn = pymysql.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
            cursor = conn.cursor()
            wait_resolved(lake, {}, 1, puller)
            for statement in (
                "SET sql_mode = ''", "CREATE DATABASE shop", "USE shop",
                "CREATE TABLE t (id INT PRIMARY KEY, v BIGINT, s VARCHAR(8))",
                "INSERT INTO t VALUES (1, 5, 'a'), (2, 300, 'b'), (3, -70000, 'c'), (4, NULL, 'd')",
                "DELETE FROM t WHERE id = 4",
                "ALTER TABLE t MODIFY COLUMN v TINYINT",
                "ALTER TABLE t MODIFY COLUMN s VARCHAR(20)",
            ):
                cursor.execute(statement)
            final = sim.tso.next()
            (pid,) = tidb.table_info("shop", "t").physical_ids()
            wait_resolved(lake, {pid: final}, final, puller)
            conn.close()
        lossy, widening = [r for r in ddl_rows(lake) if r["action"] == ActionType.MODIFY_COLUMN]
        landed = changelog(lake)
        copies = {(key, value) for table, key, ts, op, value in landed
                  if table == pid and ts == lossy["commit_ts"] and op == "put"}
        assert copies == set(snapshot_scan(sim, *table_record_span(pid), lossy["commit_ts"]))
        assert len(copies) == 3
        assert not [row for row in landed if row[2] == widening["commit_ts"]]
