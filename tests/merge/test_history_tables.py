"""SCD type 2 history tables and soft deletes, checked against the upstream HISTORY
(history_oracle.TableHistory: a replay of every commit, sharing no code with the merge).

History: after every merge run at checkpoint C, for every upstream commit ts T <= C, the history
rows valid at T equal the upstream table at T, and every crash point between the history's and
the replica's commits (both orders) is rerun without a lost or doubled version. Soft deletes: at
every checkpoint the live rows equal the upstream, the flagged rows are exactly the keys that
existed at an earlier checkpoint and are gone now, with their values from then.
"""

from __future__ import annotations

import copy

import pytest
from deltalake import DeltaTable
from merge.history_oracle import TableHistory, valid_at
from merge.lake_fixtures import FedLake, sorted_rows
from status.status_schema import valid

from tidelake.cli import main
from tidelake.config import HistoryConfig
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.history_table import HISTORY_APP_ID, history_checkpoint, history_path, history_since
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.status.status_report import collect_status

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


class Crash(Exception):
    pass


def paths(lake: FedLake) -> tuple[str, str]:
    """(replica, history table) of shop.orders."""
    key = SchemaHistory.load(lake.layout).find("shop", "orders")
    replica = ReplicaCatalog(lake.layout).get(key).path
    return replica, history_path(lake.layout, replica)


def merge(spark, lake: FedLake, config: HistoryConfig, crash: tuple[object, str] | None = None, monkeypatch=None):
    """One run_merge; `crash` = (module, function) made to raise for this run only."""
    if crash is not None:
        module, name = crash

        def boom(*args, **kwargs):
            raise Crash(f"injected in {name}")

        monkeypatch.setattr(module, name, boom)
    try:
        (result,) = run_merge(spark, lake.layout, history_config=config).tables
    finally:
        if crash is not None:
            monkeypatch.undo()
    if crash is None:
        assert result.status == MergeStatus.MERGED, result.reason
    else:
        assert result.status == MergeStatus.ERROR and "injected" in result.reason, result.reason
    return result


def orders_lake(tmp_path) -> tuple[FedLake, TableHistory]:
    """A fed lake with an empty shop.orders (id PK, note), and its upstream history."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    table = TableHistory(lake, "shop", "orders")
    table.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    return lake, table


def row(i: int, note: str) -> dict:
    return {"id": i, "note": note}


def check_history(spark, table: TableHistory, path: str, checkpoint: int) -> int:
    """The history at its latest version (whose checkpoint is `checkpoint`) against the upstream
    at every change ts up to it and at the checkpoint; returns how many ts were compared."""
    assert history_checkpoint(path) == checkpoint
    version = DeltaTable(path).version()
    columns = {f.name for f in spark.read.format("delta").load(path).schema.fields}
    rows = [r.asDict() for r in spark.read.format("delta").load(path).collect()]
    versions = [(r["id"], r["_tidb_valid_from"]) for r in rows]
    assert len(versions) == len(set(versions)), "a version written twice"
    assert all(r["_tidb_is_current"] == (r["_tidb_valid_to"] is None) for r in rows)
    assert all(r["_tidb_valid_to"] is None or r["_tidb_valid_from"] < r["_tidb_valid_to"] for r in rows)
    current = [r["id"] for r in rows if r["_tidb_is_current"]]
    assert len(current) == len(set(current)), "two current versions of one key"
    since = history_since(path)
    points = [t for t in table.commit_ts() if since <= t <= checkpoint] + [checkpoint]
    for ts in points:
        # columns the upstream had at ts that the history still has (a dropped column is gone)
        compared = [c for c in table.columns_at(ts) if c in columns]
        expected = sorted_rows([{c: r[c] for c in compared} for r in table.rows_at(ts)])
        assert valid_at(spark, path, ts, compared, version) == expected, f"history at {ts}"
    return len(points)


def test_history_holds_every_upstream_version_through_crashes_and_ddl(spark, tmp_path, monkeypatch, capsys):
    from tidelake.merge import scd2_history, table_merge
    from tidelake.merge.table_merge import TableMerge

    config = HistoryConfig(scd2=("shop.*",))
    lake, table = orders_lake(tmp_path)

    # window 1: inserts, one key updated twice inside the window, a delete, landed twice
    with lake.txn() as t:
        for i in (1, 2, 3):
            t.put("shop", "orders", row(i, "a"))
    with lake.txn() as t:
        t.put("shop", "orders", row(1, "b"))
    with lake.txn() as t:
        t.put("shop", "orders", row(1, "c"))
        t.delete("shop", "orders", row(2, ""))
    lake.reland(lake.committed[:4])
    c1 = lake.resolve()
    merge(spark, lake, config)
    replica, history = paths(lake)
    assert history_since(history) < c1 and read_checkpoint(replica) == c1
    assert check_history(spark, table, history, c1) >= 4
    assert spark.read.format("delta").load(history).where("id = 1").count() == 3  # a, b, c: every commit

    # window 2: crash AFTER the history commit, before the replica's (across windows, a reinsert)
    with lake.txn() as t:
        t.put("shop", "orders", row(1, "d"))
        t.put("shop", "orders", row(2, "again"))
    with lake.txn() as t:
        t.delete("shop", "orders", row(3, ""))
        t.put("shop", "orders", row(4, "x"))
    with lake.txn() as t:
        t.put("shop", "orders", row(4, "y"))
    c2 = lake.resolve()
    merge(spark, lake, config, (TableMerge, "_write"), monkeypatch)
    assert history_checkpoint(history) == c2 and read_checkpoint(replica) == c1
    history_version = DeltaTable(history).version()
    merge(spark, lake, config)
    assert read_checkpoint(replica) == c2 and DeltaTable(history).version() == history_version  # skipped
    check_history(spark, table, history, c2)

    # window 3: crash IN the history commit: neither moved; the rerun writes both once
    with lake.txn() as t:
        t.put("shop", "orders", row(4, "z"))
        t.put("shop", "orders", row(5, "new"))
    c3 = lake.resolve()
    merge(spark, lake, config, (scd2_history, "_commit"), monkeypatch)
    assert history_checkpoint(history) == read_checkpoint(replica) == c2
    merge(spark, lake, config)
    check_history(spark, table, history, c3)

    # window 4: the replica committed and the history did not (its commit lost): the next window
    # reads the history's changes from its own checkpoint, so nothing is lost
    with lake.txn() as t:
        t.put("shop", "orders", row(5, "newer"))
        t.delete("shop", "orders", row(1, ""))
    c4 = lake.resolve()
    monkeypatch.setattr(table_merge, "write_history", lambda *args: 0)
    merge(spark, lake, config)
    monkeypatch.undo()
    assert read_checkpoint(replica) == c4 and history_checkpoint(history) == c3
    with lake.txn() as t:
        t.put("shop", "orders", row(1, "back"))
    c5 = lake.resolve()
    merge(spark, lake, config)
    check_history(spark, table, history, c5)

    # ADD COLUMN with a row at the DDL's ts; crash after the history's DDL commit, before the replica's
    old = copy.deepcopy(lake.up.table("shop", "orders"))
    added = table.ddl(lake.up.add_column("shop", "orders", ("qty", "int", {"default": "7"})))
    with lake.txn(commit_ts=added) as t:
        t.put("shop", "orders", row(2, "at the ddl"), written_with=old)
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 4, "note": "q", "qty": 1})
    c6 = lake.resolve()
    merge(spark, lake, config, (TableMerge, "_merge_at_ddl_ts"), monkeypatch)
    assert history_checkpoint(history) == added and read_checkpoint(replica) == added - 1
    merge(spark, lake, config)
    check_history(spark, table, history, c6)

    # DROP COLUMN, then TRUNCATE (closes every current version), then rows again
    table.ddl(lake.up.drop_column("shop", "orders", "note"))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 4, "qty": 2})
    before = lake.up.table("shop", "orders").physical_ids()
    truncated = table.ddl(lake.up.truncate_table("shop", "orders"))
    for pid in before:  # the puller resolves the retired id up to its truncate
        lake.lander.resolve(pid, truncated)
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 4, "qty": 3})
        t.put("shop", "orders", {"id": 9, "qty": 9})
    c7 = lake.resolve()
    merge(spark, lake, config)
    assert "note" not in spark.read.format("delta").load(history).columns
    assert check_history(spark, table, history, c7) >= 15
    closed = spark.read.format("delta").load(history).where(f"_tidb_valid_to = {truncated}").count()
    assert closed == len(table.rows_at(truncated - 1))
    assert DeltaTable(history).transaction_version(HISTORY_APP_ID) == c7
    report = collect_status(lake.layout)
    (status,) = report.tables  # `tidelake status` lists it
    assert valid(report.to_json())["tables"][0]["history"]["checkpoint_ts"] == c7
    assert status.history.to_json() == {"path": history, "checkpoint_ts": c7, "since_ts": history_since(history)}
    assert status.soft_deletes is False
    assert main(["status", "--lake", lake.layout.root]) == 0
    assert "history for consumers" in capsys.readouterr().out
    lake.close()


def test_soft_deletes_flag_deleted_rows_and_a_reinsert_is_merged_not_appended(spark, tmp_path):
    config = HistoryConfig(soft_deletes=("shop.orders",))
    lake, table = orders_lake(tmp_path)
    checkpoints: list[int] = []

    def check(checkpoint: int) -> list[dict]:
        replica, _ = paths(lake)
        assert read_checkpoint(replica) == checkpoint
        checkpoints.append(checkpoint)
        rows = [r.asDict() for r in spark.read.format("delta").load(replica).collect()]
        assert sorted(r["id"] for r in rows) == sorted({r["id"] for r in rows}), "a key held twice"
        columns = table.columns_at(checkpoint)
        live = sorted_rows([{c: r[c] for c in columns} for r in rows if not r["_tidb_deleted"]])
        assert live == table.rows_at(checkpoint)
        now = {r["id"] for r in table.rows_at(checkpoint)}
        last_seen = {}  # key -> its row at the last earlier checkpoint that had it
        for earlier in checkpoints[:-1]:
            for r in table.rows_at(earlier):
                last_seen[r["id"]] = r
        deleted = {r["id"]: {c: r[c] for c in columns} for r in rows if r["_tidb_deleted"]}
        assert deleted == {k: v for k, v in last_seen.items() if k not in now}
        return rows

    with lake.txn() as t:
        for i in (1, 2, 3):
            t.put("shop", "orders", row(i, "a"))
    check(_merged(spark, lake, config))
    with lake.txn() as t:
        t.delete("shop", "orders", row(2, ""))
        t.put("shop", "orders", row(3, "b"))
    rows = check(_merged(spark, lake, config))
    assert [r["id"] for r in rows if r["_tidb_deleted"]] == [2]
    # a window of only new keys (no old values): key 2 comes back. An append would hold it twice.
    with lake.txn() as t:
        t.put("shop", "orders", row(2, "back"))
        t.put("shop", "orders", row(4, "new"))
    check(_merged(spark, lake, config))
    replica, _ = paths(lake)
    assert DeltaTable(replica).history(1)[0]["operation"] == "MERGE"
    # deleted, inserted and deleted again in one window: the row stays as it was first deleted
    with lake.txn() as t:
        t.delete("shop", "orders", row(1, ""))
    check(_merged(spark, lake, config))
    with lake.txn() as t:
        t.put("shop", "orders", row(1, "brief"))
    with lake.txn() as t:
        t.delete("shop", "orders", row(1, ""))
    check(_merged(spark, lake, config))
    # TRUNCATE flags every row; a key written again after it is live again
    before = lake.up.table("shop", "orders").physical_ids()
    truncated = table.ddl(lake.up.truncate_table("shop", "orders"))
    for pid in before:
        lake.lander.resolve(pid, truncated)
    with lake.txn() as t:
        t.put("shop", "orders", row(3, "after"))
    rows = check(_merged(spark, lake, config))
    assert sorted(r["id"] for r in rows if not r["_tidb_deleted"]) == [3]
    (status,) = collect_status(lake.layout).tables
    assert status.soft_deletes is True and status.history is None
    # windows this small go to the driver writer with soft deletes too (Spark only turned them on)
    writes = [h for h in DeltaTable(replica).history() if h["operation"] in ("WRITE", "MERGE", "DELETE")]
    assert writes and all(h.get("clientVersion", "").startswith("delta-rs") for h in writes), writes
    lake.close()


def _merged(spark, lake: FedLake, config: HistoryConfig) -> int:
    upper = lake.resolve()
    merge(spark, lake, config)
    return upper
