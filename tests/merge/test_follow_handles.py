"""The merge follower keeps each replica's Delta log handle from pass to pass
(tidelake.merge.replica_handles): a pass opens no replica log and reads no recorded checkpoint when
only its own commits moved the log; another merger's commit between passes is seen (the follower
merges from that writer's checkpoint, nothing applied twice); a replica folder replaced under the
same path between passes is opened afresh, not written through the stale handle; the handles kept
are bounded and freed when the follower stops. No Spark: the windows are small, so delta-rs
writes them on the driver."""

from __future__ import annotations

import shutil
import threading
from collections import Counter

import deltalake
import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, path_of, put, shop_lake, sorted_rows

from tidelake.lake.checkpoint import (
    CHECKPOINT_METADATA_KEY,
    MERGE_APP_ID,
    metadata_int,
    read_checkpoint,
)
from tidelake.merge import follow, table_merge
from tidelake.merge.follow import Follower, FollowOptions
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import MergeReport, run_merge
from tidelake.merge.replica_handles import ReplicaHandle, ReplicaHandles

@pytest.fixture
def lake(tmp_path):
    lake = shop_lake(str(tmp_path / "lake"))
    yield lake
    lake.close()


@pytest.fixture
def log_reads(monkeypatch):
    """Replica log opens (delta-rs table constructions), listings of a log's new commits and reads
    of the merge's recorded checkpoint, by table path, in every thread."""
    counts, lock = Counter(), threading.Lock()
    real_init, real_txn = deltalake.DeltaTable.__init__, deltalake.DeltaTable.transaction_version
    real_update = deltalake.DeltaTable.update_incremental

    def init(self, table_uri, *args, **kwargs):
        with lock:
            counts["open", str(table_uri).removeprefix("file://")] += 1
        return real_init(self, table_uri, *args, **kwargs)

    def txn(self, app_id):
        if app_id == MERGE_APP_ID:
            with lock:
                counts["checkpoint", self.table_uri.removeprefix("file://").rstrip("/")] += 1
        return real_txn(self, app_id)

    def update(self):
        with lock:
            counts["listing", self.table_uri.removeprefix("file://").rstrip("/")] += 1
        return real_update(self)

    monkeypatch.setattr(deltalake.DeltaTable, "__init__", init)
    monkeypatch.setattr(deltalake.DeltaTable, "transaction_version", txn)
    monkeypatch.setattr(deltalake.DeltaTable, "update_incremental", update)
    return counts


def replica_rows(path: str) -> list[dict]:
    return sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist())


def following(lake: FedLake, handles: ReplicaHandles | None = None) -> tuple[Follower, list[MergeReport]]:
    """A follower on one table thread, and the reports of its passes' runs."""
    f = Follower(None, lake.layout, FollowOptions(threads=1), lambda line: None)
    if handles is not None:
        f.handles = handles
    reports: list[MergeReport] = []
    real_merge = f._merge

    def merge(*args, **kwargs) -> MergeReport:
        reports.append(real_merge(*args, **kwargs))
        return reports[-1]

    f._merge = merge
    return f, reports


def result_of(report: MergeReport, table: str):
    (result,) = [r for r in report.tables if r.table == f"shop.{table}"]
    return result


def recorded_checkpoints(path: str) -> list[int]:
    """The checkpoint each commit of the replica recorded, oldest first (commits recording none left out)."""
    commits = sorted(DeltaTable(path).history(), key=lambda c: c["version"])
    return [c for c in (metadata_int(c, CHECKPOINT_METADATA_KEY) for c in commits) if c is not None]


def test_a_pass_after_the_followers_own_commits_opens_no_replica_log_and_reads_no_checkpoint(lake, log_reads):
    f, reports = following(lake)
    put(lake, "orders", range(1, 20), "a")
    lake.resolve()
    assert f.poll() == "pass"
    path = path_of(lake, "orders")
    put(lake, "orders", range(10, 30), "b")
    upper = lake.resolve()
    log_reads.clear()
    assert f.poll() == "pass"
    result = result_of(reports[-1], "orders")
    assert (result.status, result.windows, result.checkpoint_after) == (MergeStatus.MERGED, 1, upper)
    assert log_reads["open", path] == 0  # the handle kept from the first pass, brought up to date
    assert log_reads["checkpoint", path] == 0  # known from the handle's own commit
    # the log is listed only to bring the handle to the pass's own commit: before it, the next
    # commit file's absence told that no writer had moved the log
    assert log_reads["listing", path] == 1
    assert result.replica.checkpoint == upper == read_checkpoint(path)
    assert replica_rows(path) == lake.expected_rows("shop", "orders", upper)


def test_a_pass_reads_the_control_tables_and_the_changelog_once(lake, monkeypatch):
    """The pass's look for work and its run share one read of the watermarks, the DDL history and
    the changelog, in that order (invariant 2), not one each."""
    reads = []
    real_control, real_snapshot = follow.read_control, follow.ChangelogSnapshot

    def control(layout):
        reads.append("control")
        return real_control(layout)

    def snapshot(layout):
        reads.append("changelog")
        return real_snapshot(layout)

    for module in (follow, table_merge):
        monkeypatch.setattr(module, "read_control", control)
        monkeypatch.setattr(module, "ChangelogSnapshot", snapshot)
    f, reports = following(lake)
    put(lake, "orders", range(1, 20), "a")
    upper = lake.resolve()
    reads.clear()
    assert f.poll() == "pass"
    assert reads == ["control", "changelog"]
    assert result_of(reports[-1], "orders").checkpoint_after == upper


def test_a_kept_handle_sees_another_mergers_commit_and_merges_from_its_checkpoint(lake, log_reads):
    f, reports = following(lake)
    put(lake, "orders", range(1, 20), "a")
    lake.resolve()
    f.poll()
    path = path_of(lake, "orders")
    put(lake, "orders", range(10, 30), "b")
    lake.resolve()
    other = run_merge(None, lake.layout, tables=["shop.orders"], write_log=False, threads=1)  # its own handles
    theirs = result_of(other, "orders").checkpoint_after
    assert theirs is not None and theirs == read_checkpoint(path)
    put(lake, "orders", range(25, 40), "c")
    upper = lake.resolve()
    log_reads.clear()
    assert f.poll() == "pass"
    result = result_of(reports[-1], "orders")
    assert log_reads["open", path] == 0
    assert log_reads["checkpoint", path] == 1  # the log moved under the handle: read once, then known
    assert log_reads["listing", path] == 2  # the other merger's commit listed, then the pass's own
    assert (result.checkpoint_before, result.checkpoint_after, result.windows) == (theirs, upper, 1)
    # every checkpoint recorded once, in order: the other merger's window was not applied again
    recorded = recorded_checkpoints(path)
    assert recorded == sorted(set(recorded)) and recorded[-2:] == [theirs, upper]
    assert replica_rows(path) == lake.expected_rows("shop", "orders", upper)


def test_a_replica_folder_replaced_between_passes_is_opened_afresh(lake, log_reads):
    """The folder is removed and another merger replays the table from its CREATE into the same
    path, in more commits than the old log had: a stale handle would follow the new log's later
    commits onto the old one's files, and the next MERGE would read files that are gone."""
    f, reports = following(lake)
    put(lake, "orders", range(1, 20), "a")
    lake.resolve()
    f.poll()
    path = path_of(lake, "orders")
    old_version = DeltaTable(path).version()
    for w in range(4):
        put(lake, "orders", range(15 + w, 25 + w), f"r{w}")
        lake.resolve()
    shutil.rmtree(path)
    other = run_merge(None, lake.layout, tables=["shop.orders"], max_chunk_rows=10, write_log=False, threads=1)
    assert result_of(other, "orders").status == MergeStatus.MERGED
    assert DeltaTable(path).version() > old_version + 1
    put(lake, "orders", range(1, 40), "c")  # updates of every row: a MERGE over the replica's files
    upper = lake.resolve()
    log_reads.clear()
    assert f.poll() == "pass"
    opened = log_reads["open", path]
    result = result_of(reports[-1], "orders")
    assert (result.status, result.checkpoint_after) == (MergeStatus.MERGED, upper), result.reason
    assert replica_rows(path) == lake.expected_rows("shop", "orders", upper)
    assert opened == 1  # opened afresh


def test_the_handles_kept_are_bounded_and_freed_when_the_follower_stops(lake):
    now = [0.0]
    handles = ReplicaHandles(max_handles=1, idle_s=60.0, clock=lambda: now[0])
    f, reports = following(lake, handles)
    put(lake, "orders", range(1, 5), "a")
    put(lake, "items", range(1, 5), "i")
    lake.resolve()
    f.poll()
    assert {r.table for r in reports[-1].tables if r.status == MergeStatus.MERGED} == {"shop.orders", "shop.items"}
    assert len(handles) == 1  # the cap
    now[0] += 61.0
    handles.expire()
    assert len(handles) == 0  # unused for longer than idle_s

    kept: list[int] = []

    def say(line: str) -> None:
        if line.startswith("merge pass"):
            kept.append(len(f.handles))
            f.stop.set()

    f.handles, f.say = ReplicaHandles(), say
    put(lake, "orders", range(5, 9), "b")
    lake.resolve()
    f.run()
    assert kept == [1] and len(f.handles) == 0


def test_the_least_recently_used_handle_goes_first_and_one_of_another_path_is_not_reused(tmp_path):
    import pyarrow as pa

    paths = {}
    for key in (1, 2, 3):
        paths[key] = str(tmp_path / f"t{key}")
        deltalake.write_deltalake(paths[key], pa.table({"a": [key]}))
    handles = ReplicaHandles(max_handles=2)
    taken = {key: handles.take(key, path) for key, path in paths.items()}
    handles.keep(1, taken[1])
    handles.keep(2, taken[2])
    assert handles.take(1, paths[1]) is taken[1]  # taken: the caller's until kept again
    handles.keep(1, taken[1])
    handles.keep(3, taken[3])  # 2 is the least recently kept
    assert handles.take(2, paths[2]) is not taken[2]
    assert handles.take(3, paths[1]) is not taken[3]  # another path: opened, not the kept one
    assert isinstance(handles.take(1, paths[1]), ReplicaHandle)
    assert handles.take(4, str(tmp_path / "none")) is None


def test_a_handle_lists_its_log_only_when_the_next_commit_exists_and_none_older_than_idle_is_taken(tmp_path,
                                                                                                  log_reads):
    import pyarrow as pa

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"a": [1]}))
    now = [0.0]
    handles = ReplicaHandles(idle_s=60.0, clock=lambda: now[0])
    handle = handles.take(1, path)
    log_reads.clear()
    handle.refresh()
    assert log_reads["listing", path] == 0 and handle.table.version() == 0  # nothing moved: no listing
    deltalake.write_deltalake(path, pa.table({"a": [2]}), mode="append")  # another writer's commit
    deltalake.write_deltalake(path, pa.table({"a": [3]}), mode="append")
    handle.refresh()
    assert log_reads["listing", path] == 1 and handle.table.version() == 2  # seen, both
    handles.keep(1, handle)
    assert handles.take(1, path) is handle  # within idle_s: followed
    handles.keep(1, handle)
    now[0] += 61.0  # no expire() sweep ran: the age alone refuses it
    assert handles.take(1, path) is not handle


def test_a_handle_of_a_folder_whose_name_its_uri_escapes_reads_that_folders_log(tmp_path):
    import pyarrow as pa

    path = str(tmp_path / "a b%c")
    deltalake.write_deltalake(path, pa.table({"a": [1]}))
    handle = ReplicaHandle.open(path)
    assert "a%20b%25c" in handle.table.table_uri  # what the handle reads its files by
    assert handle.commit_digest() is not None
    deltalake.write_deltalake(path, pa.table({"a": [2]}), mode="append")
    handle.refresh()
    assert handle.table.version() == 1
