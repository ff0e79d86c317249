"""The log upkeep of a replica written on the driver (tidelake.lake.log_cleanup, log_phase): its
delta-rs commits make no listing of the whole log (counted from moto's own request log; delta-rs'
default post-commit cleanup makes one at every commit, its pages growing with the log's commits),
and the cleanup runs once in every CLEANUP_INTERVAL versions instead, at the version the replica's
phase sets, deleting the entries past the retention below a checkpoint past it, as delta-rs'
`cleanup_metadata` does; its only checkpoints are the cadence's (checkpoint_due), none from
delta-rs' own hook. Each replica is made in a folder chosen for the phase the test needs."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, Field, Schema

from tidelake.demos.s3_requests import RequestLog
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.log_cleanup import CLEANUP_INTERVAL, EXPIRED_LOG_CLEANUP, cleanup_due
from tidelake.lake.object_store import lake_storage_options
from tidelake.merge.replica_schema import REPLICA_PROPERTIES
from tidelake.merge.window_spec import Action, Clause, MergeSpec, When
from tidelake.merge.writers import delta_rs_writer
from tidelake.merge.writers.delta_rs_writer import checkpoint_due, commit_txn_only, merge_arrow

DAY_S = 86_400


def _replica(path: str, options: dict[str, str] | None, **properties: str) -> DeltaTable:
    return DeltaTable.create(path, Schema([Field("id", "long")]), configuration={**REPLICA_PROPERTIES, **properties},
                             storage_options=options)


def _folder(tmp_path: Path, phase: Callable[[str], bool]) -> str:
    """A folder under `tmp_path` whose table URI (delta-rs': file://<folder>/) has the `phase` wanted."""
    return next(str(tmp_path / f"t{i}") for i in itertools.count() if phase((tmp_path / f"t{i}").as_uri() + "/"))


def _replica_in_phase(tmp_path: Path, phase: Callable[[str], bool], **properties: str) -> tuple[str, DeltaTable]:
    path = _folder(tmp_path, phase)
    replica = _replica(path, None, **properties)
    assert phase(replica.table_uri)  # the URI _folder predicted
    return path, replica


def _age(path: str, up_to: int) -> None:
    """Put the commit and checkpoint files of versions up to `up_to` past the replica's retention
    (Delta's default 30 days: a replica sets none)."""
    past = time.time() - 31 * DAY_S
    for f in Path(path, "_delta_log").iterdir():
        if f.name[:20].isdigit() and int(f.name[:20]) <= up_to:
            os.utime(f, (past, past))


def _aged_to_the_cleanup(tmp_path: Path, **properties: str) -> tuple[str, DeltaTable]:
    """A replica whose cleanup falls at version CLEANUP_INTERVAL, at version CLEANUP_INTERVAL - 1,
    its versions up to 50 past the retention."""
    path, replica = _replica_in_phase(tmp_path, lambda uri: cleanup_due(uri, CLEANUP_INTERVAL), **properties)
    for hi in range(1, CLEANUP_INTERVAL - 1):
        commit_txn_only(replica, path, hi)  # version hi records hi; a checkpoint every 10th (checkpoint_due)
    _age(path, 50)
    commit_txn_only(replica, path, CLEANUP_INTERVAL - 1)
    return path, replica


def _oldest_commit(path: str) -> int:
    return min(int(f.name[:20]) for f in Path(path, "_delta_log").glob("*.json"))


def test_driver_commits_on_s3_list_no_whole_log(s3_server):
    root = s3_server.lake_root("log-cleanup") + "/t"
    options = lake_storage_options(root, s3_server.storage_options(), environ={})
    replica = _replica(root, options)
    assert not any(cleanup_due(replica.table_uri, v) for v in (1, 2))  # the commits counted are no cleanup's
    requests = RequestLog(s3_server)
    _, txn_only = requests.count(lambda: commit_txn_only(replica, root, 10))
    insert = MergeSpec("t.id = s.id", (Clause(When.NOT_MATCHED, None, Action.INSERT, (("id", "s.id"),)),))
    _, merged = requests.count(lambda: merge_arrow(replica, pa.table({"id": [1, 2]}), insert, 20))
    assert txn_only["put"] >= 1 and merged["put"] >= 2  # the commits were made, on this server
    assert txn_only["list_from_start"] == merged["list_from_start"] == 0
    reread = DeltaTable(root, storage_options=options)
    assert reread.version() == 2 and reread.transaction_version(MERGE_APP_ID) == 20
    assert sorted(reread.to_pyarrow_table()["id"].to_pylist()) == [1, 2]


def test_the_cleanup_runs_at_the_replicas_phase_and_deletes_what_is_past_the_retention(tmp_path,
                                                                                                     monkeypatch):
    # Checkpoints at another phase: version 100 is no checkpoint's, and the cleanup runs there all the same.
    monkeypatch.setattr(delta_rs_writer, "checkpoint_due", lambda uri, v: v % 10 == 3)
    path, replica = _aged_to_the_cleanup(tmp_path)
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
    path, replica = _aged_to_the_cleanup(tmp_path, **{EXPIRED_LOG_CLEANUP: "false"})
    commit_txn_only(replica, path, CLEANUP_INTERVAL)
    assert _oldest_commit(path) == 0


def test_a_failed_cleanup_leaves_the_commit_recorded(tmp_path, monkeypatch):
    refused = []

    def refuse(table):
        refused.append(table.version())
        raise OSError("the store refused the delete")

    monkeypatch.setattr(DeltaTable, "cleanup_metadata", refuse)
    path, replica = _aged_to_the_cleanup(tmp_path)
    commit_txn_only(replica, path, CLEANUP_INTERVAL)  # returns: the commit stands
    assert len(refused) == 1 and _oldest_commit(path) == 0
    assert DeltaTable(path).transaction_version(MERGE_APP_ID) == CLEANUP_INTERVAL


def test_replicas_of_different_phases_clean_at_different_versions(tmp_path):
    """Two replicas given the same commits (as a follower's passes give replicas created together):
    the first deletion of expired entries comes at 60 for one, at 80 for the other, not at 100 for both."""
    firsts = []
    for at in (60, 80):
        path, replica = _replica_in_phase(tmp_path, lambda uri: cleanup_due(uri, at))
        for hi in range(1, 56):
            commit_txn_only(replica, path, hi)
        _age(path, 50)
        oldest = {}
        for hi in range(56, CLEANUP_INTERVAL + 1):
            commit_txn_only(replica, path, hi)
            oldest[hi] = _oldest_commit(path)
        firsts.append(min(v for v, o in oldest.items() if o > 0))
        aged_checkpoints = [v for v in range(51) if Path(path, "_delta_log", f"{v:020}.checkpoint.parquet").exists()]
        assert oldest[CLEANUP_INTERVAL] == max(aged_checkpoints)  # below the newest checkpoint past the retention
    assert firsts == [60, 80]


def test_each_table_cleans_once_in_every_cleanup_interval_versions_from_its_own_phase():
    uris = [f"s3://lake/shop/t{i}/" for i in range(1000)]
    for uri in uris[:5]:
        assert all(sum(cleanup_due(uri, v) for v in range(s, s + CLEANUP_INTERVAL)) == 1 for s in range(0, 300, 7))
    phases = [next(v for v in range(CLEANUP_INTERVAL) if cleanup_due(uri, v)) for uri in uris]
    assert max(phases.count(p) for p in set(phases)) <= 30  # 1,000 tables: 10 a version on average, not 1,000 at 0
    assert len(set(phases)) >= 90
    for uri, p in zip(uris, phases):  # a table's cleanup falls on one of its own checkpoint versions
        assert checkpoint_due(uri, p)


def test_the_writers_commits_past_version_100_carry_only_the_cadences_checkpoints(tmp_path):
    """delta-rs' checkpoint hook (create_checkpoint, on in its defaults and in the landing writers'
    POST_COMMIT) would write one at version 99 of every replica; a replica written by the writer's
    commits (txn alone, MERGE) has the cadence's checkpoints only, and every reader loads it."""
    path, replica = _replica_in_phase(tmp_path, lambda uri: checkpoint_due(uri, 5))  # 95, 105: neither 99 nor 100
    insert = MergeSpec("t.id = s.id", (Clause(When.NOT_MATCHED, None, Action.INSERT, (("id", "s.id"),)),))
    for hi in range(1, 106):
        if hi in (99, 100):  # the hook's version, and the one after, as MERGEs
            merge_arrow(replica, pa.table({"id": [hi]}), insert, hi)
        else:
            commit_txn_only(replica, path, hi)
    log_dir = Path(path, "_delta_log")
    assert sorted(int(f.name[:20]) for f in log_dir.glob("*.checkpoint.parquet")) == list(range(5, 106, 10))
    assert DeltaLog(path).last_checkpoint() == 105
    reread = DeltaTable(path)
    assert reread.version() == 105 and reread.transaction_version(MERGE_APP_ID) == 105
    assert sorted(reread.to_pyarrow_table()["id"].to_pylist()) == [99, 100]
    assert DeltaTable(path, version=99).transaction_version(MERGE_APP_ID) == 99
