"""A replica's checkpoint lives in the replica itself: the Delta `txn` action of app MERGE_APP_ID,
recorded in the same commit as the rows it guards (invariant 3), its version the checkpoint TSO.
Delta skips a write whose version is recorded, so a retried step is a no-op. Read without Spark.
Owner: the merge writes it (tidelake.merge.txn_confs); every stage reads it here.

More: docs/internals.md#checkpoint.
"""

from __future__ import annotations

import json

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from tidelake.errors import InputError
from tidelake.lake.delta_commits import DeltaLog

MERGE_APP_ID = "tidelake-merge"
CHECKPOINT_METADATA_KEY = "tidelake.checkpoint"
REWRITE_METADATA_KEY = "tidelake.rewrite"  # the commit that rewrote a replica for a DDL (its commit ts)
# What the commit-file walk leaves to the snapshots, whose read then says it as callers expect: a
# store's error, an unreadable _last_checkpoint, a malformed commit or one without its time.
_UNTOLD = (OSError, DeltaError, ValueError, KeyError, TypeError, AttributeError, InputError)
RECORDING_WALK = 32  # commit files read back for a checkpoint's version before snapshots are loaded instead


def open_replica(path: str, storage_options: dict[str, str] | None = None,
                 version: int | None = None) -> DeltaTable | None:
    """The replica's Delta table (its log replayed once), None when there is none at `path`."""
    try:
        return DeltaTable(path, version=version, storage_options=storage_options)
    except TableNotFoundError:
        return None


def read_checkpoint(path: str, storage_options: dict[str, str] | None = None,
                    app_id: str = MERGE_APP_ID) -> int | None:
    """The replica's checkpoint TSO, or None when the replica does not exist or never recorded one.
    A history table records its own under another app id (tidelake.lake.history_table)."""
    walked = _walk_back(DeltaLog(path, storage_options), None, app_id, first=False)
    if walked is not None:
        return walked[0]
    table = open_replica(path, storage_options)
    return None if table is None else table.transaction_version(app_id)


def replica_version(path: str, storage_options: dict[str, str] | None = None) -> int | None:
    """Latest Delta version of the replica, None when it does not exist."""
    table = open_replica(path, storage_options)
    return None if table is None else table.version()


def checkpoint_version(path: str, storage_options: dict[str, str] | None = None) -> tuple[int, int] | None:
    """(checkpoint, the first Delta version that records it): the version to publish as "upstream
    at the checkpoint" (asset events, time travel). A later version may keep the checkpoint with
    other files (a compaction). None before any checkpoint."""
    walked = _walk_back(DeltaLog(path, storage_options), None, MERGE_APP_ID)
    if walked is not None:
        newest, first = walked
        return None if newest is None or first is None else (newest, first)
    table = open_replica(path, storage_options)
    checkpoint = None if table is None else table.transaction_version(MERGE_APP_ID)
    if checkpoint is None:
        return None
    version = _search_snapshots(path, checkpoint, storage_options, MERGE_APP_ID)
    return None if version is None else (checkpoint, version)


def version_at_checkpoint(path: str, ts: int, storage_options: dict[str, str] | None = None,
                          app_id: str = MERGE_APP_ID) -> int | None:
    """The first Delta version whose checkpoint is >= `ts` (time travel to "upstream at ts");
    versions whose log was cleaned up cannot be loaded and count as "before". None if no version
    reaches `ts`."""
    walked = _walk_back(DeltaLog(path, storage_options), ts, app_id)
    if walked is not None:
        return walked[1]
    return _search_snapshots(path, ts, storage_options, app_id)


def _walk_back(log: DeltaLog, ts: int | None, app_id: str, first: bool = True,
               newest: int | None = None) -> tuple[int | None, int | None] | None:
    """(the checkpoint at version `newest` (default: the newest version), and with `first` the
    first version whose checkpoint is >= `ts`, or >= that checkpoint when `ts` is None), read from
    the commit files' `txn` actions of `app_id` (PROTOCOL.md "Transaction Identifiers") walking
    back from `newest`: checkpoints only grow, so the walk stops at the first older one, a file or
    two back where loading snapshots replays the log each time. Either is None when there is none.
    None when the files cannot tell: no table, a file gone (cleaned up), nothing decided within
    RECORDING_WALK files, or a `newest` or first version below the log's checkpoint (it may not be
    loadable): the snapshots decide then. Replicas keep every txn (no setTransactionRetentionDuration)."""
    try:
        floor = log.last_checkpoint()  # versions from it on are loadable
        if newest is None:
            newest = log.latest_version(floor)  # _last_checkpoint read once
        elif newest < floor:  # that version may not be loadable: the snapshots say
            return None
    except _UNTOLD:
        return None
    if newest is None:
        return None
    current = found = target = None
    for version in range(newest, max(-1, newest - RECORDING_WALK), -1):
        try:
            commit = log.commit(version)
        except _UNTOLD:
            return None
        if commit is None:
            return None
        recorded = commit.txns.get(app_id)
        if recorded is None:
            continue
        if current is None:
            current = recorded
            target = current if ts is None else ts
            if not first or current < target:
                return current, None
        if recorded < target:
            break
        found = version
        if found < floor:  # an answer below the log's checkpoint is not taken: no need to walk on
            return None
    else:
        if newest - RECORDING_WALK >= 0:  # not walked to version 0: an older commit may tell
            return None
        if current is None:
            return None, None
    return current, found


def _search_snapshots(path: str, ts: int, storage_options: dict[str, str] | None, app_id: str) -> int | None:
    """version_at_checkpoint by a binary search over snapshots (checkpoints only grow with versions)."""
    table = open_replica(path, storage_options)
    if table is None or (table.transaction_version(app_id) or -1) < ts:
        return None
    lo, hi = 0, table.version()  # invariant: hi reaches ts
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            snapshot = DeltaTable(path, version=mid, storage_options=storage_options)
            reached = (snapshot.transaction_version(app_id) or -1) >= ts
        except DeltaError:
            reached = False
        if reached:
            hi = mid
        else:
            lo = mid + 1
    return hi


def checkpoint_at_version(path: str, version: int, storage_options: dict[str, str] | None = None) -> int | None:
    """The checkpoint recorded as of Delta `version` of the replica."""
    walked = _walk_back(DeltaLog(path, storage_options), None, MERGE_APP_ID, first=False, newest=version)
    if walked is not None:
        return walked[0]
    return DeltaTable(path, version=version, storage_options=storage_options).transaction_version(MERGE_APP_ID)


def checkpoint_metadata(version: int) -> str:
    """commitInfo.userMetadata of a commit that records checkpoint `version` (visible in DESCRIBE HISTORY)."""
    return json.dumps({CHECKPOINT_METADATA_KEY: version})


def metadata_int(commit: dict, key: str) -> int | None:
    """The int under `key` in a commit's userMetadata JSON (DeltaTable.history()); None when absent."""
    meta = commit.get("userMetadata")
    if not meta:
        return None
    try:
        value = json.loads(meta).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def rewrite_metadata(ddl_ts: int) -> str:
    """commitInfo.userMetadata of the commit that rewrote a replica for the DDL committed at
    `ddl_ts` (tidelake.merge.ddl_apply); change readers skip it (tidelake.consumers.replica_changes)."""
    return json.dumps({REWRITE_METADATA_KEY: ddl_ts})
