"""Checkpoints read from the replica's Delta txn action without Spark (delta-rs writes the txns here)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import DeltaError

from tidelake.capture.landing.app_txn import commit_properties
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.checkpoint import (
    MERGE_APP_ID,
    checkpoint_at_version,
    _search_snapshots,
    checkpoint_version,
    read_checkpoint,
    replica_version,
    version_at_checkpoint,
)

SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _commit(path, ts, app_id=MERGE_APP_ID):
    props = commit_properties(app_id, ts) if ts is not None else None
    write_deltalake(path, pa.table({"id": [1]}, schema=SCHEMA), mode="append", commit_properties=props)


def test_checkpoint_follows_the_txn_of_the_merge_app(tmp_path):
    path = str(tmp_path / "replica")
    assert read_checkpoint(path) is None and replica_version(path) is None
    _commit(path, 100)  # v0
    _commit(path, None)  # v1: a commit without txn (e.g. OPTIMIZE) keeps the checkpoint
    _commit(path, 7, app_id="somebody-else")  # v2: other apps do not count
    _commit(path, 250)  # v3
    assert read_checkpoint(path) == 250 and replica_version(path) == 3
    assert [checkpoint_at_version(path, v) for v in range(4)] == [100, 100, 100, 250]
    assert version_at_checkpoint(path, 100) == 0
    assert version_at_checkpoint(path, 101) == 3  # first version that reaches it
    assert version_at_checkpoint(path, 250) == 3
    assert version_at_checkpoint(path, 251) is None


def test_checkpoint_survives_log_checkpoints_and_cleanup(tmp_path):
    path = str(tmp_path / "replica")
    for ts in range(10, 130, 10):  # v0..v11
        _commit(path, ts)
    assert version_at_checkpoint(path, 55) == 5
    DeltaTable(path).create_checkpoint()  # at v11
    for v in range(3):  # log cleanup: versions before the checkpoint can no longer be loaded
        (tmp_path / "replica" / "_delta_log" / f"{v:020d}.json").unlink()
    assert read_checkpoint(path) == 120  # read from the checkpoint parquet
    assert version_at_checkpoint(path, 55) == 11  # the first version still readable that reaches it


def test_checkpoint_version_is_the_first_version_recording_the_checkpoint(tmp_path):
    """A later commit without a txn (a compaction, a window's first commit) keeps the checkpoint
    but holds other data: readers of "upstream at the checkpoint" must get the recording one."""
    path = str(tmp_path / "replica")
    assert checkpoint_version(path) is None
    _commit(path, None)
    assert checkpoint_version(path) is None
    _commit(path, 100)
    _commit(path, 200)
    _commit(path, None)
    _commit(path, None)
    assert read_checkpoint(path) == 200
    assert checkpoint_version(path) == (200, 2)


def _by_snapshots(path):
    """The answer loading snapshots (delta-rs replays the log), not reading commit files."""
    checkpoint = read_checkpoint(path)
    return None if checkpoint is None else (checkpoint, _search_snapshots(path, checkpoint, None, MERGE_APP_ID))


def _agree(path, where):
    assert checkpoint_version(path) == _by_snapshots(path), where
    assert read_checkpoint(path) == DeltaTable(path).transaction_version(MERGE_APP_ID), where
    for v in range(DeltaTable(path).version() + 1):
        try:
            expected = DeltaTable(path, version=v).transaction_version(MERGE_APP_ID)
        except DeltaError:  # cleaned up: not loadable, by either way
            with pytest.raises(DeltaError):
                checkpoint_at_version(path, v)
            continue
        assert checkpoint_at_version(path, v) == expected, (where, v)
    for ts in (0, 99, 100, 101, 150, 200, 201, 300, 301, 400, 401):
        assert version_at_checkpoint(path, ts) == _search_snapshots(path, ts, None, MERGE_APP_ID), (where, ts)


def test_checkpoints_read_from_commit_files_agree_with_the_snapshots(tmp_path, monkeypatch):
    """The commit-file walk answers most reads; where it cannot tell (the recording commit's
    predecessors cleaned up, a recording further back than the walk), the snapshots do."""
    from tidelake.lake import checkpoint as module

    path = str(tmp_path / "replica")
    script = [None, 100, 100, None, 200, None, 7, 200, None, 300, None, None]  # 7: another app's txn
    for step, ts in enumerate(script):
        _commit(path, ts, app_id="somebody-else" if ts == 7 else MERGE_APP_ID)
        _agree(path, f"after commit {step}")
        assert module._walk_back(DeltaLog(path), None, MERGE_APP_ID) is not None  # told by the files alone
    assert checkpoint_version(path) == (300, 9) and version_at_checkpoint(path, 150) == 4
    monkeypatch.setattr(module, "RECORDING_WALK", 2)  # the recording is 3 commits back: snapshots decide
    _agree(path, "a short walk")
    assert checkpoint_version(path) == (300, 9)
    monkeypatch.undo()
    DeltaTable(path).create_checkpoint()  # at v11, after the recording: v9 cannot be loaded once cleaned
    for v in range(4):
        (tmp_path / "replica" / "_delta_log" / f"{v:020d}.json").unlink()
    _agree(path, "cleaned up")
    assert checkpoint_version(path) == (300, 11)
    _commit(path, 400)  # v12, above the log's checkpoint
    _agree(path, "after the log's checkpoint")
    assert checkpoint_version(path) == (400, 12)
