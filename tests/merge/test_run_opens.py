"""What one merge run opens, whatever its tables and windows: each replica's Delta log once (its
first plan's handle goes to its merge, which brings it up to date before each window and for the
facts it records) and the replica catalog once (read once the leases are held, shared by the table
threads), and the changelog's first windows in one scan. A handle brought up to date sees another
writer's commit. No Spark: the windows are small, so delta-rs writes them on the driver; the
session is a stand-in and anything that used it beyond making the table threads' sessions fails."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import deltalake
import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, sorted_rows

from tidelake import tso
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.replica_catalog import ReplicaCatalog, catalog_path
from tidelake.merge import changelog_snapshot, merge_run
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.merge.writers.delta_rs_writer import CHECKPOINT_INTERVAL, checkpoint_due, commit_txn_only

TABLES = ("orders", "items")
WINDOWS = 3


class NoSpark:
    """The session of a run whose windows all go to the driver: asked only for the table threads'."""

    conf = SimpleNamespace(getAll={})

    def newSession(self) -> NoSpark:
        return self


@pytest.fixture
def lake(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.up.ts = tso.from_datetime(datetime.now(timezone.utc) - timedelta(minutes=5))
    lake.ddl(lake.up.create_schema("shop"))
    for name in TABLES:
        lake.ddl(lake.up.create_table("shop", name, [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.resolve()
    # creates the replicas, on the run's default threads: without Spark, none asks for a session
    created = run_merge(None, lake.layout, write_log=False)
    assert [r.status for r in created.tables] == [MergeStatus.MERGED] * len(TABLES), created.tables
    for w in range(WINDOWS):
        with lake.txn() as t:
            for name in TABLES:
                for i in range(10):
                    t.put("shop", name, {"id": i, "note": f"{name}{w}"})
        lake.resolve()
    yield lake
    lake.close()


@pytest.fixture
def opens(monkeypatch):
    """Delta log opens (delta-rs table constructions) by table path, in every thread."""
    counts, lock = Counter(), threading.Lock()
    real_init = deltalake.DeltaTable.__init__

    def init(self, table_uri, *args, **kwargs):
        with lock:
            counts[str(table_uri).removeprefix("file://")] += 1
        return real_init(self, table_uri, *args, **kwargs)

    monkeypatch.setattr(deltalake.DeltaTable, "__init__", init)
    return counts


def paths(lake: FedLake) -> dict[str, str]:
    return {name: ReplicaCatalog(lake.layout).find("shop", name).path for name in TABLES}


@pytest.mark.parametrize("threads", [1, 2])
def test_a_run_opens_each_replica_and_the_catalog_once_whatever_its_windows(lake, opens, threads):
    replicas = paths(lake)
    opens.clear()
    report = run_merge(NoSpark(), lake.layout, max_chunk_rows=10, threads=threads)
    assert {r.table: r.windows for r in report.tables} == {f"shop.{n}": WINDOWS for n in TABLES}
    assert {name: opens[path] for name, path in replicas.items()} == {name: 1 for name in TABLES}
    assert opens[catalog_path(lake.layout)] == 1
    for result in report.tables:  # the facts recorded are the replica's after the run's last commit
        assert result.replica.checkpoint == result.checkpoint_after == read_checkpoint(result.replica.path)


def test_a_run_sees_a_commit_another_writer_made_after_its_first_plan(lake, monkeypatch):
    """Another writer records orders' checkpoint at the watermarks between the first plans (the
    handles the table merges then use) and the merges: orders' merge starts from that checkpoint
    and merges nothing, as a merge that opened the replica afresh would."""
    replicas = paths(lake)
    upper = read_checkpoint(replicas["orders"])
    real_open_run_pass = merge_run._open_run_pass
    moved: list[int] = []

    def other_writer_then_open(spark, layout, changelog, firsts):
        (first,) = [f for f in firsts.values() if f.replica.path == replicas["orders"]]
        moved.append(first.plan.upper)
        commit_txn_only(DeltaTable(replicas["orders"]), replicas["orders"], first.plan.upper)
        return real_open_run_pass(spark, layout, changelog, firsts)

    monkeypatch.setattr(merge_run, "_open_run_pass", other_writer_then_open)
    report = run_merge(NoSpark(), lake.layout, threads=2)
    results = {r.table: r for r in report.tables}
    assert moved and moved[0] > upper
    assert (results["shop.orders"].checkpoint_before, results["shop.orders"].windows) == (moved[0], 0)
    assert results["shop.orders"].status == MergeStatus.IDLE
    assert results["shop.items"].status == MergeStatus.MERGED
    assert results["shop.items"].checkpoint_after == moved[0]
    rows = sorted_rows(DeltaTable(replicas["items"]).to_pyarrow_table().to_pylist())
    assert rows == lake.expected_rows("shop", "items", moved[0])


def test_the_first_windows_of_the_run_are_read_in_one_scan_of_the_changelog(lake, monkeypatch):
    reads: list[str] = []
    real_read = changelog_snapshot.read_delta

    def read(table, columns=None, where=None):
        reads.append(where)
        return real_read(table, columns, where)

    monkeypatch.setattr(changelog_snapshot, "read_delta", read)
    report = run_merge(NoSpark(), lake.layout, threads=2)
    assert {r.table: r.windows for r in report.tables} == {f"shop.{n}": 1 for n in TABLES}
    assert len(reads) == 1
    for name, path in paths(lake).items():
        upper = read_checkpoint(path)
        assert sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist()) == lake.expected_rows("shop", name, upper)


def test_driver_windows_keep_the_checkpoint_cadence_on_the_runs_handle(tmp_path):
    """Each window's commit moves the run's handle (appends and MERGEs leave it at their commit):
    the replica gets its Delta checkpoint at every CHECKPOINT_INTERVAL-th version, as Spark would
    (from the phase its URI sets)."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.resolve()
    run_merge(None, lake.layout, write_log=False, threads=1)
    path = ReplicaCatalog(lake.layout).find("shop", "orders").path
    start = DeltaTable(path).version()
    for w in range(CHECKPOINT_INTERVAL + 2):
        with lake.txn() as t:
            for i in range(10):
                t.put("shop", "orders", {"id": i + 5 * (w % 2), "note": f"w{w}"})  # appends, then MERGEs
        lake.resolve()
    (result,) = run_merge(None, lake.layout, max_chunk_rows=10, write_log=False, threads=1).tables
    lake.close()
    version = DeltaTable(path).version()
    assert result.windows == version - start >= CHECKPOINT_INTERVAL + 1
    checkpoints = {int(p.name.split(".")[0]) for p in Path(path, "_delta_log").glob("*.checkpoint.parquet")}
    # from version 1: the first run's window (after the creation, version 0) keeps the cadence too
    due = {v for v in range(1, version + 1) if checkpoint_due(DeltaTable(path).table_uri, v)}
    assert checkpoints == due and len(due) >= 1
