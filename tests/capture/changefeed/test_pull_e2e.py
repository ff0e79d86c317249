"""The puller end to end on the simulator: TiDB-shaped DDL and DML in, the lake read back.

The oracle is the simulator's MVCC write records (every committed put/delete of a table after
the start ts), never a list the test typed: the changelog must equal it exactly, every landed
watermark must cover only rows already landed (invariant 1), and each finished DDL job must be
in the ddl table once with its job row's commit ts.
"""

from __future__ import annotations

import json
import random

from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    changelog,
    ddl_rows,
    make_config,
    oracle,
    sim,
    start_ts,
    wait_resolved,
    watermarks,
)
from tests.capture.tidb_writes import TiDBWrites
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.lake.layout import DdlSource

SHOP, OTHER = 2, 3
ORDERS, ITEMS, ORDERS_AFTER_TRUNCATE, SCRATCH, EVENTS = 110, 111, 112, 150, 130


def random_rows(tidb: TiDBWrites, rng: random.Random, table_id: int, n_txns: int) -> int:
    last = 0
    for _ in range(n_txns):
        handles = rng.sample(range(40), rng.randint(1, 4))
        last = tidb.rows(table_id, {h: None if rng.random() < 0.2 else rng.randbytes(8) for h in handles})
    return last


def assert_watermarks_cover_landed_rows(sim, lake, table_ids, start_ts):
    """Invariant 1, read as merge reads: watermarks first, then the changelog."""
    w = watermarks(lake)
    landed = set(changelog(lake))
    for table_id in table_ids:
        mark = w.table_resolved.get(table_id, 0)
        due = {r for r in oracle(sim, table_id, start_ts) if r[2] <= mark}
        assert due <= landed, f"table {table_id}: watermark {mark} covers {len(due - landed)} rows not landed"


def test_pull_captures_exactly_the_commits_after_start_across_ddl(sim, tmp_path):
    rng = random.Random(7)
    lake = tmp_path / "lake"
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_db(OTHER, "other")
    tidb.create_table(SHOP, ORDERS, "orders")
    tidb.create_table(SHOP, EVENTS, "events", partition_ids=[131, 132])
    tidb.create_table(OTHER, SCRATCH, "scratch")
    random_rows(tidb, rng, ORDERS, 5)  # before the start: must not land

    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        resolved = watermarks(lake).table_resolved
        assert set(resolved) == {ORDERS, 131, 132} and min(resolved.values()) >= start

        random_rows(tidb, rng, ORDERS, 6)
        random_rows(tidb, rng, 131, 3)
        random_rows(tidb, rng, 132, 3)
        random_rows(tidb, rng, SCRATCH, 3)  # filtered out
        created = tidb.create_table(SHOP, ITEMS, "items")  # joins mid-run
        random_rows(tidb, rng, ITEMS, 5)
        assert_watermarks_cover_landed_rows(sim, lake, [ORDERS, 131, 132, ITEMS], start)
        truncated = tidb.truncate_table(ORDERS, ORDERS_AFTER_TRUNCATE)
        last = random_rows(tidb, rng, ORDERS_AFTER_TRUNCATE, 4)
        last = max(last, random_rows(tidb, rng, ITEMS, 2))
        dropped = tidb.drop_table(ITEMS)
        last = max(last, random_rows(tidb, rng, 131, 2))
        wait_resolved(lake, {ORDERS_AFTER_TRUNCATE: last, 131: last, 132: last}, dropped, run)
        assert_watermarks_cover_landed_rows(sim, lake, [ORDERS, ORDERS_AFTER_TRUNCATE, 131, 132, ITEMS], start)
    assert run.error is None

    expected = set().union(*(oracle(sim, t, start) for t in (ORDERS, ORDERS_AFTER_TRUNCATE, ITEMS, 131, 132)))
    landed = changelog(lake)
    assert set(landed) == expected
    assert len({(r[1], r[2]) for r in landed}) == len(expected)  # duplicates only as (key, commit ts) repeats
    w = watermarks(lake)
    assert w.table_resolved[ITEMS] >= dropped - 1 and w.table_resolved[ORDERS] >= truncated - 1
    assert w.table_resolved[ORDERS_AFTER_TRUNCATE] >= last and w.ddl_resolved >= dropped

    ddl = ddl_rows(lake)
    jobs = sorted((r["job_id"], r["commit_ts"], r["table_id"]) for r in ddl if r["source"] == DdlSource.JOB)
    by_commit = {ts: job_id for job_id, ts in tidb.finished.items()}
    assert jobs == sorted([(by_commit[created], created, ITEMS), (by_commit[truncated], truncated, ORDERS),
                           (by_commit[dropped], dropped, ITEMS)])
    truncate_row = next(r for r in ddl if r["commit_ts"] == truncated)
    assert json.loads(truncate_row["table_info"])["id"] == ORDERS_AFTER_TRUNCATE
    snapshot = {(r["schema_name"], r["table_name"], r["commit_ts"]) for r in ddl if r["source"] == DdlSource.SNAPSHOT}
    # the start row (no schema, no table) records the start ts even on a cluster with no table
    assert snapshot == {(None, None, start), ("shop", None, start), ("shop", "orders", start), ("shop", "events", start)}


def test_pull_with_the_tidb_front_ddl_and_dml(sim, tmp_path):
    """Same oracle with SimTiDB: its own job rows, system tables, partitions and renames."""
    from tidelake.sim.tidb.session import SimTiDB

    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    tidb.create_database("other")
    cols = [("id", "bigint"), ("v", "varchar(20)")]
    tidb.create_table("shop", "orders", cols, primary_key=["id"])
    tidb.create_table("shop", "events", cols, primary_key=["id"],
                      partition={"type": "range", "column": "id", "bounds": [("p0", 100), ("p1", 200)]})
    tidb.create_table("other", "scratch", cols, primary_key=["id"])
    n = iter(range(1, 10**6))

    def dml(table: str, db: str = "shop", rows: int = 3, base: int = 0) -> int:
        with tidb.txn() as t:
            for _ in range(rows):
                i = base + next(n) % 90
                if not t.update(db, table, {"id": i}, {"v": f"u{i}"}):
                    t.insert(db, table, {"id": i, "v": f"v{i}"})
            t.delete(db, table, {"id": base + 1})
        return t.commit_ts

    def physical(db: str, table: str) -> list[int]:
        return tidb.table_info(db, table).physical_ids()

    dml("orders")
    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        since = {pid: start for pid in physical("shop", "orders") + physical("shop", "events")}
        dml("orders"), dml("events"), dml("events", base=100), dml("scratch", "other")
        tidb.add_column("shop", "orders", ("note", "varchar(10)"))
        dml("orders")
        joined = tidb.rename_table("other", "scratch", "scratch", new_db="shop").finished_ts
        since.update({pid: joined for pid in physical("shop", "scratch")})
        dml("scratch")
        added = tidb.add_partition("shop", "events", "p2", 300).finished_ts
        since.update({pid: added for pid in physical("shop", "events") if pid not in since})
        dml("events", base=200)
        truncated = tidb.truncate_partition("shop", "events", "p0").finished_ts
        since.update({pid: truncated for pid in physical("shop", "events") if pid not in since})
        dml("events")
        emptied = tidb.truncate_table("shop", "orders").finished_ts
        since.update({pid: emptied for pid in physical("shop", "orders") if pid not in since})
        last = dml("orders")
        dropped = tidb.drop_table("shop", "scratch").finished_ts
        wait_resolved(lake, {pid: last for pid in physical("shop", "orders") + physical("shop", "events")},
                      dropped, run)
    assert run.error is None
    expected = set().union(*(oracle(sim, pid, after) for pid, after in since.items()))
    assert set(changelog(lake)) == expected and expected
    jobs = {(r["job_id"], r["commit_ts"]) for r in ddl_rows(lake) if r["source"] == DdlSource.JOB}
    assert {ts for _, ts in jobs} >= {joined, added, truncated, emptied, dropped}
    assert len({job_id for job_id, _ in jobs}) == len(jobs)
