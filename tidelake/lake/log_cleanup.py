"""When a Delta table's expired log entries are deleted. delta-rs' default post-commit hook runs
its cleanup after every commit, and the cleanup lists the table's whole _delta_log (every page on
S3): each commit then pays a listing of all the commits the log retention keeps (30 days by
default). A writer of a table committed often commits without the cleanup hook (landing:
POST_COMMIT; replicas: delta_rs_writer.REPLICA_POST_COMMIT) and calls `clean_expired_logs` after
each commit: it runs once in CLEANUP_INTERVAL versions, at each table's phase (lake.log_phase),
deleting the same entries a little later; replicas created together clean in different passes.
Owner: the lake; the replicas' delta-rs writer and the landing writers (app_txn.commit_once) use it.

More: docs/internals.md#log_cleanup.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable, PostCommitHookProperties

from tidelake.lake.log_phase import on_phase

log = logging.getLogger(__name__)

POST_COMMIT = PostCommitHookProperties(create_checkpoint=True, cleanup_expired_logs=False)
EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"  # PROTOCOL.md table properties; default on
CLEANUP_INTERVAL = 100  # versions between cleanups: delta-rs' own checkpoint interval (delta.checkpointInterval)


def cleanup_due(table_uri: str, version: int) -> bool:
    """Whether `version` of the table at `table_uri` gets the expired-log cleanup: one version in
    every CLEANUP_INTERVAL, from the table's phase (log_phase.on_phase)."""
    return on_phase(table_uri, version, CLEANUP_INTERVAL)


def clean_expired_logs(table: DeltaTable) -> None:
    """Delete the table's expired log entries when `table`'s version is one cleanup_due gives
    (the handle at the caller's commit) and the table leaves
    `delta.enableExpiredLogCleanup` on, as delta-rs' hook and Spark honour it (cleanup_metadata
    itself does not read it). Never raises: the caller's commit has landed, so a failed cleanup is
    a warning, and the next one deletes what this one did not."""
    try:
        if not cleanup_due(table.table_uri, table.version()):
            return
        if table.metadata().configuration.get(EXPIRED_LOG_CLEANUP, "true").strip().lower() == "false":
            return
        table.cleanup_metadata()
    except Exception:  # noqa: BLE001 - see the docstring
        log.warning("expired-log cleanup of %s failed after a commit; left for the next one", table.table_uri,
                    exc_info=True)
