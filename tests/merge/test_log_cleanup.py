"""Expired log entries of a replica written on the driver (tidelake.lake.log_cleanup): its delta-rs
commits make no listing of the whole log (counted from moto's own request log; delta-rs' default
post-commit cleanup makes one at every commit, its pages growing with the log's commits), and
the cleanup runs at every CLEANUP_INTERVAL-th version instead, deleting the entries past the
retention below a checkpoint past it, as delta-rs' `cleanup_metadata` does."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, Field, Schema

from tidelake.demos.s3_requests import RequestLog
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.log_cleanup import CLEANUP_INTERVAL, EXPIRED_LOG_CLEANUP
from tidelake.lake.object_store import lake_storage_options
from tidelake.merge.replica_schema import REPLICA_PROPERTIES
from tidelake.merge.window_spec import Action, Clause, MergeSpec, When
from tidelake.merge.writers import delta_rs_writer
from tidelake.merge.writers.delta_rs_writer import checkpoint_due, commit_txn_only, merge_arrow

DAY_S = 86_400


def _replica(path: str, options: dict[str, str] | None, **properties: str) -> DeltaTable:
    return DeltaTable.create(path, Schema([Field("id", "long")]), configuration={**REPLICA_PROPERTIES, **properties},
                             storage_options=options)


def _aged_to_the_cleanup(path: str, properties: dict[str, str] | None = None) -> DeltaTable:
    """A replica at version CLEANUP_INTERVAL - 1 whose versions up to 50 are past the retention."""
    replica = _replica(path, None, **(properties or {}))
    for hi in range(1, CLEANUP_INTERVAL - 1):
        commit_txn_only(replica, path, hi)  # version hi records hi; a checkpoint every 10th (checkpoint_due)
    past = time.time() - 31 * DAY_S  # past the replica's retention: Delta's default 30 days, it sets none
    for f in Path(path, "_delta_log").iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) <= 50:
            os.utime(f, (past, past))
    commit_txn_only(replica, path, CLEANUP_INTERVAL - 1)
    return replica


def _oldest_commit(path: str) -> int:
    return min(int(f.name[:20]) for f in Path(path, "_delta_log").glob("*.json"))


def test_driver_commits_on_s3_list_no_whole_log(s3_server):
    root = s3_server.lake_root("log-cleanup") + "/t"
    options = lake_storage_options(root, s3_server.storage_options(), environ={})
    replica = _replica(root, options)
    requests = RequestLog(s3_server)
    _, txn_only = requests.count(lambda: commit_txn_only(replica, root, 10))
    insert = MergeSpec("t.id = s.id", (Clause(When.NOT_MATCHED, None, Action.INSERT, (("id", "s.id"),)),))
    _, merged = requests.count(lambda: merge_arrow(replica, pa.table({"id": [1, 2]}), insert, 20))
    assert txn_only["put"] >= 1 and merged["put"] >= 2  # the commits were made, on this server
    assert txn_only["list_from_start"] == merged["list_from_start"] == 0
    reread = DeltaTable(root, storage_options=options)
    assert reread.version() == 2 and reread.transaction_version(MERGE_APP_ID) == 20
    assert sorted(reread.to_pyarrow_table()["id"].to_pylist()) == [1, 2]


def test_the_cleanup_runs_at_every_cleanup_interval_th_version_and_deletes_what_is_past_the_retention(tmp_path,
                                                                                                     monkeypatch):
    # A phase other than 0: version 100 is no checkpoint's, and the cleanup runs there all the same.
    monkeypatch.setattr(delta_rs_writer, "checkpoint_due", lambda uri, v: v % 10 == 3)
    path = str(tmp_path / "t")
    replica = _aged_to_the_cleanup(path)
    assert _oldest_commit(path) == 0  # not at every commit
    commit_txn_only(replica, path, CLEANUP_INTERVAL)
    assert _oldest_commit(path) == 43  # below the newest checkpoint past the retention, as delta-rs keeps it
    assert DeltaTable(path).transaction_version(MERGE_APP_ID) == CLEANUP_INTERVAL
    assert DeltaTable(path, version=43).transaction_version(MERGE_APP_ID) == 43


def test_each_replicas_checkpoint_cadence_has_its_own_phase():
    uris = [f"file:///lake/shop/t{i}/" for i in range(100)]
    for uri in uris[:5]:  # one checkpoint in every CHECKPOINT_INTERVAL consecutive versions
        assert all(sum(checkpoint_due(uri, v) for v in range(s, s + 10)) == 1 for s in range(30))
    phases = {next(v for v in range(10) if checkpoint_due(uri, v)) for uri in uris}
    assert phases == set(range(10))  # replicas created together spread their checkpoints


def test_a_table_that_turns_expired_log_cleanup_off_keeps_its_log(tmp_path):
    path = str(tmp_path / "t")
    replica = _aged_to_the_cleanup(path, {EXPIRED_LOG_CLEANUP: "false"})
    commit_txn_only(replica, path, CLEANUP_INTERVAL)
    assert _oldest_commit(path) == 0


def test_a_failed_cleanup_leaves_the_commit_recorded(tmp_path, monkeypatch):
    def refuse(table):
        raise OSError("the store refused the delete")

    monkeypatch.setattr(DeltaTable, "cleanup_metadata", refuse)
    path = str(tmp_path / "t")
    replica = _aged_to_the_cleanup(path)
    commit_txn_only(replica, path, CLEANUP_INTERVAL)  # returns: the commit stands
    assert _oldest_commit(path) == 0
    assert DeltaTable(path).transaction_version(MERGE_APP_ID) == CLEANUP_INTERVAL
