"""The idempotent flush commit every landing writer shares: one Delta commit per flush sequence,
recorded as the table's app transaction (delta-rs records it but does not skip a recorded one, so
the check is ours, on the snapshot the commit is built on). A conflict with a commit of the same
app id is a second puller (LakeConflictError); any other is rebuilt. The writers commit with
POST_COMMIT and the expired log entries are deleted here once in every CLEANUP_INTERVAL versions,
at the table's phase as for a replica (tidelake.lake.log_cleanup.cleanup_due). Owner: the lander.

More: docs/internals.md#app_txn.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping

from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError

from tidelake.errors import TidelakeError
from tidelake.lake.log_cleanup import clean_expired_logs


class LakeConflictError(TidelakeError):
    """Another process committed under our app id: two pullers run the same changefeed."""


class LakeBusyError(TidelakeError):
    """Commits kept losing races to other writers' commits; the flush is retried later."""


# How far back a retry looks for the commit of its own sequence (only retries pay for this).
WRITER_LOOKBACK_COMMITS = 200


def commit_properties(app_id: str, seq: int, writer: str = "",
                      metadata: Mapping[str, str] | None = None) -> CommitProperties:
    """App transaction (app_id, seq) plus commitInfo naming the flush and the writer instance, and
    the writer's own `metadata` entries (never in place of those three)."""
    return CommitProperties(
        app_transactions=[Transaction(app_id, seq)],
        custom_metadata={**(metadata or {}), "tidelake.app": app_id, "tidelake.flush_seq": str(seq),
                         "tidelake.writer": writer},
    )


def writer_of(table: DeltaTable, app_id: str, seq: int) -> str | None:
    """Writer instance whose commit recorded (app_id, seq), from recent commitInfo; None if not
    found. Lets a retry tell its own lost-ack commit from a second puller's."""
    table.update_incremental()
    for commit in table.history(WRITER_LOOKBACK_COMMITS):
        if commit.get("tidelake.app") == app_id and commit.get("tidelake.flush_seq") == str(seq):
            return commit.get("tidelake.writer")
    return None


class AppTxnTable:
    """A tidelake table written by one app id with idempotent flush sequences (Delta app
    transactions): what the changelog, ddl and watermarks writers share."""

    def __init__(self, table: DeltaTable, app_id: str) -> None:
        self._table = table
        self.app_id = app_id

    def version(self) -> int:
        """Latest table version (includes other writers' commits)."""
        self._table.update_incremental()
        return self._table.version()

    def committed_seq(self) -> int:
        """Highest flush sequence of our app id already in the table (0 if none)."""
        self._table.update_incremental()
        return self._table.transaction_version(self.app_id) or 0

    def writer_of(self, seq: int) -> str | None:
        return writer_of(self._table, self.app_id, seq)


# Rebuilds of a commit that lost a race to another app's commit before the lander's slower retry.
FOREIGN_CONFLICT_RETRIES = 6


def commit_once(
    table: DeltaTable,
    app_id: str,
    seq: int,
    committed_seq: Callable[[], int],
    write: Callable[[], None],
    what: str,
    writer: str = "",
) -> bool:
    """Run `write` (one commit carrying (app_id, seq) and `writer` in its commitInfo); False if
    `seq` was already recorded, before or by this very write (told by `writer`).

    A commit conflict means a second puller only when a commit of OUR app id came in between:
    then LakeConflictError. Otherwise another writer won the race and the commit is rebuilt on
    the new snapshot; LakeBusyError (transient) if that keeps happening."""
    attempt = 0
    while True:
        before = committed_seq()
        if before >= seq:
            return False
        try:
            write()
        except CommitFailedError as exc:
            table.update_incremental()
            recorded = table.transaction_version(app_id) or 0
            if recorded >= seq and writer and writer_of(table, app_id, seq) == writer:
                # This very write landed: on an object store, a commit whose 2xx was lost is
                # retried by the client as a conditional PUT, which then fails against itself.
                return False
            if recorded != before:
                raise LakeConflictError(
                    f"{what} commit of {app_id} flush {seq} lost a commit conflict to a commit of the "
                    f"same app id: is a second puller running this changefeed? {exc}"
                ) from exc
            if attempt == FOREIGN_CONFLICT_RETRIES:
                raise LakeBusyError(
                    f"{what} commit of {app_id} flush {seq} lost {attempt + 1} commit races to other "
                    f"writers; it will be retried: {exc}"
                ) from exc
            time.sleep(random.uniform(0, 0.05 * 2**attempt))
            attempt += 1
        else:
            clean_expired_logs(table)  # the cleanup the commit left out (POST_COMMIT); never raises
            return True
