"""The window semantics (tidelake.merge.window_spec) on the driver with delta-rs, no Spark job: the
window is read from the run's changelog snapshot, collapsed and decoded in Arrow, then ONE commit:
an append of new keys' puts, a rewrite of the files its keys touch (writers.file_rewrite), a MERGE
where that does not apply, or a commit of the txn alone for a window without changes; on a
column-mapped replica only the rewrite (its writes are the ones checked against Spark's) or the
`fallback` writer, Spark, besides the txn alone (docs/internals.md#file_rewrite).
The commit records the txn (MERGE_APP_ID, hi) and the checkpoint's userMetadata
(docs/stack.md#delta-lake-deltatable-python-api-and-write-options); a commit racing another job's
of the same app id fails delta-rs' conflict check (CommitFailedError) and the window is retried;
no delta-rs post-commit hook runs (keep_checkpoint_cadence). Owner: TableMerge, which chooses it.
"""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, PostCommitHookProperties, write_deltalake
from pyspark.sql.types import StructType

from tidelake.errors import InputError
from tidelake.failpoints import failpoint
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.log_cleanup import clean_expired_logs
from tidelake.lake.log_phase import on_phase
from tidelake.lake.row_change import OP_PUT
from tidelake.lake.store_room import check_room
from tidelake.merge.changelog_snapshot import ChangelogSnapshot, held_keys
from tidelake.merge.decimal_stats import unsafe_stats
from tidelake.merge.mount import mount_arrow
from tidelake.merge.replica_schema import DELETED_COLUMN, key_columns, quote
from tidelake.merge.soft_deletes import has_soft_deletes
from tidelake.merge.txn_confs import delta_rs_commit_properties
from tidelake.merge.window_spec import (
    OP_COLUMN,
    Action,
    MergeSpec,
    When,
    can_append,
    match_columns,
    removal_clause,
    replica_merge,
)
from tidelake.merge.writers.driver_features import column_mapping_by_name, driver_protocol
from tidelake.merge.writers.file_rewrite import rewrite_window
from tidelake.merge.writers.replica_window import ReplicaWindow, WindowWriter

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL = 10  # Spark's Delta default (delta.checkpointInterval)
# Neither of delta-rs' post-commit hooks: its checkpoint hook writes one at the same versions on
# every replica (delta-rs kernel/transaction PostCommit::create_checkpoint, version + 1 a multiple
# of delta.checkpointInterval: 99, 199, ...). keep_checkpoint_cadence owns checkpoints and cleanup.
REPLICA_POST_COMMIT = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def writable(replica: DeltaTable, target: StructType, column_mapping: bool = False) -> bool:
    """Whether delta-rs may write this replica: a protocol the driver writes (driver_features:
    change data feed and timestampNtz; column mapping in name mode only for a caller that writes
    through DeltaRsWriter (`column_mapping`: its rewrite stores physical names, delta-rs' own
    MERGE, DELETE and OPTIMIZE are not checked against Spark there) and without soft deletes,
    whose flag only a MERGE sets; no deletion vectors or type widening), and no DECIMAL whose
    statistics delta-rs would write wrong (tidelake.merge.decimal_stats). Soft deletes are the
    MERGE's clauses, as on Spark."""
    return driver_protocol(replica, column_mapping=column_mapping and not has_soft_deletes(target)) \
        and not unsafe_stats(target, replica.metadata().configuration)


class DeltaRsWriter:
    """Writes windows with delta-rs, reading them from the run's changelog snapshot."""

    def __init__(self, changelog: ChangelogSnapshot, fallback: WindowWriter | None = None) -> None:
        self.changelog = changelog
        self.fallback = fallback  # writes what a column-mapped replica's rewrite does not

    def write(self, window: ReplicaWindow) -> tuple[int, int]:
        w = window
        mapped = column_mapping_by_name(w.replica)
        collapsed = None if w.empty else self.changelog.last_changes(w.physical_ids, w.lo, w.hi)
        # A full local disk fails here, before a file is written (a write that runs out of room
        # mid-file makes object_store's background upload task print a Rust panic).
        check_room(w.path, collapsed.nbytes if collapsed is not None else 0, "a merge window")
        soft = has_soft_deletes(w.target)
        if collapsed is None or collapsed.num_rows == 0:
            if w.removal is None:
                commit_txn_only(w.replica, w.path, w.hi)
                return 0, 0
            if mapped:
                return self._fall_back(w, "a DDL's removal")
            failpoint("merge.before_commit", w.path)
            if soft:  # flagged, not deleted: the removal clause of a MERGE of no rows, as on Spark
                nothing = pa.schema(w.replica.schema().to_arrow()).empty_table()
                metrics = merge_arrow(w.replica, nothing, MergeSpec("false", (removal_clause(w.removal, True),)), w.hi)
                removed = int(metrics.get("num_target_rows_updated", 0))
            else:
                metrics = w.replica.delete(w.removal.condition(), commit_properties=delta_rs_commit_properties(w.hi),
                                           post_commithook_properties=REPLICA_POST_COMMIT)
                removed = int(metrics.get("num_deleted_rows", 0))
            _record_if_unchanged(w)
            if removed:
                keep_checkpoint_cadence(w.replica, at_commit=True)
            return 0, removed
        # The soft-delete flag is the MERGE's to set (window_spec.replica_merge), not a mounted column.
        target = StructType([f for f in w.target.fields if f.name != DELETED_COLUMN]) if soft else w.target
        columns = [f.name for f in target.fields]
        mounted = mount_arrow(collapsed, w.info, target)
        appendable = can_append(held_keys(collapsed), w.recorded, w.lo, soft, w.removal)
        if appendable and not mapped:
            puts = mounted.filter(pc.equal(mounted[OP_COLUMN], OP_PUT)).select(columns)
            failpoint("merge.before_commit", w.path)
            write_deltalake(w.replica, puts, mode="append", commit_properties=delta_rs_commit_properties(w.hi),
                            post_commithook_properties=REPLICA_POST_COMMIT)
            keep_checkpoint_cadence(w.replica, at_commit=True)
            return collapsed.num_rows, puts.num_rows
        failpoint("merge.before_commit", w.path)
        if not soft and w.removal is None:
            rewritten = rewrite_window(w.replica, mounted, columns, key_columns(w.info), match_columns(w.info), w.hi,
                                       self.changelog.layout.storage_options, append=appendable)
            if rewritten is not None:
                if rewritten[1]:
                    keep_checkpoint_cadence(w.replica, at_commit=True)
                else:  # nothing changed, nothing committed: the txn alone, as after a MERGE of no row
                    _record_if_unchanged(w)
                return rewritten
        if mapped:
            return self._fall_back(w, "a window the rewrite does not apply")
        metrics = merge_arrow(w.replica, mounted, replica_merge(w.info, columns, soft, w.removal), w.hi)
        written = sum(int(metrics.get(k, 0)) for k in
                      ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted"))
        # A MERGE that changed no row made no commit: a DDL's removal of rows already gone, or, with
        # soft deletes, a key flagged before and deleted again after coming back within the window.
        if w.removal is not None or written == 0:
            _record_if_unchanged(w)
        if written:
            keep_checkpoint_cadence(w.replica, at_commit=True)
        return int(metrics.get("num_source_rows", 0)), written

    def _fall_back(self, window: ReplicaWindow, what: str) -> tuple[int, int]:
        """Hand a column-mapped replica's window to the fallback writer (nothing written yet)."""
        if self.fallback is None:
            raise InputError(f"replica {window.path}: {what} of a column-mapped replica needs Spark, and none is given")
        log.debug("replica %s: %s of a column-mapped replica goes to Spark", window.path, what)
        return self.fallback.write(window)


def merge_arrow(replica: DeltaTable, source: pa.Table, spec: MergeSpec, hi: int, app_id: str = MERGE_APP_ID) -> dict:
    """MERGE `source` into `replica` as `spec` says, in one commit recording checkpoint `hi` as
    `app_id`'s txn (a history table's is HISTORY_APP_ID)."""
    merger = replica.merge(source, spec.on, source_alias="s", target_alias="t",
                           commit_properties=delta_rs_commit_properties(hi, app_id),
                           post_commithook_properties=REPLICA_POST_COMMIT)
    for c in spec.clauses:
        values = {quote(column): value for column, value in c.values}
        if (c.when, c.action) == (When.MATCHED, Action.DELETE):
            merger = merger.when_matched_delete(c.condition)
        elif (c.when, c.action) == (When.MATCHED, Action.UPDATE):
            merger = merger.when_matched_update(values, c.condition)
        elif (c.when, c.action) == (When.NOT_MATCHED, Action.INSERT):
            merger = merger.when_not_matched_insert(values, c.condition)
        elif (c.when, c.action) == (When.NOT_MATCHED_BY_SOURCE, Action.DELETE):
            merger = merger.when_not_matched_by_source_delete(c.condition)
        elif (c.when, c.action) == (When.NOT_MATCHED_BY_SOURCE, Action.UPDATE):
            merger = merger.when_not_matched_by_source_update(values, c.condition)
        else:
            raise InputError(f"merge clause {c.when} {c.action} has no delta-rs form")
    return merger.execute()


def commit_txn_only(replica: DeltaTable, path: str, hi: int, app_id: str = MERGE_APP_ID) -> None:
    """A commit of the txn alone (`app_id`'s): a window without changes still moves the checkpoint."""
    failpoint("merge.before_commit", path)
    replica.create_write_transaction([], mode="append", schema=replica.schema(),
                                     partition_by=replica.metadata().partition_columns or None,
                                     commit_properties=delta_rs_commit_properties(hi, app_id),
                                     post_commithook_properties=REPLICA_POST_COMMIT)
    replica.update_incremental()  # this commit does not move the handle; the merge log's facts read it
    keep_checkpoint_cadence(replica, at_commit=True)


def record_if_unchanged(replica: DeltaTable, path: str, hi: int, app_id: str = MERGE_APP_ID) -> bool:
    """delta-rs makes no commit for a DELETE or MERGE that changes no row, so its txn is not
    recorded; the txn alone is committed then (the rows were already as the step leaves them).
    Whether it was."""
    replica.update_incremental()
    if replica.transaction_version(app_id) == hi:
        return False
    commit_txn_only(replica, path, hi, app_id)
    return True


def _record_if_unchanged(window: ReplicaWindow) -> None:
    record_if_unchanged(window.replica, window.path, window.hi)


def checkpoint_due(table_uri: str, version: int) -> bool:
    """Whether `version` of the replica at `table_uri` gets the cadence's checkpoint: one version in
    every CHECKPOINT_INTERVAL, from the replica's phase (log_phase.on_phase), so the replicas a
    follower merges in the same passes (created together, one commit a pass each) do not all write
    their checkpoints in one pass."""
    return on_phase(table_uri, version, CHECKPOINT_INTERVAL)


def keep_checkpoint_cadence(replica: DeltaTable, at_commit: bool = False) -> None:
    """A checkpoint every CHECKPOINT_INTERVAL versions (checkpoint_due), the cadence Spark keeps, so
    Spark readers of a replica written only by delta-rs (merges, maintenance) replay short logs,
    and the expired log entries deleted once in every CLEANUP_INTERVAL versions
    (tidelake.lake.log_cleanup.cleanup_due): the writer's commits leave both to this
    (REPLICA_POST_COMMIT). `at_commit`: the handle is at the commit already (a delta-rs append or
    MERGE leaves it there; a commit of the txn alone does not). The commit has landed by now, so a failed checkpoint or cleanup is only
    logged, as Spark's Delta does: the next one covers it."""
    try:
        if not at_commit:
            replica.update_incremental()
        if checkpoint_due(replica.table_uri, replica.version()):
            replica.create_checkpoint()
    except Exception:  # noqa: BLE001 - see the docstring
        log.warning("checkpoint of replica %s failed after its commit; left for the next one", replica.table_uri,
                    exc_info=True)
        return
    clean_expired_logs(replica)  # never raises
