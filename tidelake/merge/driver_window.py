"""Small windows applied on the driver with delta-rs: no Spark job.

Why: a Spark INSERT or MERGE commit of a window costs ~1.5-2.7 s whatever its size: a Delta
snapshot rebuild (3 jobs), source materialisation, the file-matching and rewrite jobs (about 12
jobs for a MERGE) and the driver's planning between them (bench/README.md "Per-table costs of a
small window"). The window's rows are few; reading, collapsing and decoding them on the driver
and committing with delta-rs takes tens of milliseconds for an append and a few hundred for a
MERGE. Above `DRIVER_WINDOW_MAX_ROWS` changes (tidelake.merge.merge_job) Spark does it.

Same rows, same commits, as the Spark path of tidelake.merge.merge_job.merge_window:
- read: the window's changelog rows (partition- and commit-ts-pruned, latest version), collapsed
  to each raw key's last change by tidelake.merge.window_keys.last_changes (the rule of Spark's
  tidelake.merge.changelog_reader.collapse_last_change), the old value of the key's first change
  kept (what the replica holds at lo);
- decode: the mount decoder (tidelake.merge.mount), the same code Spark's mapInArrow runs;
- commit: ONE commit per window, an append of the puts when no key held a row at lo (and the
  replica is at lo), otherwise one MERGE with the same clauses as Spark's; a window with no
  change is a commit of the txn alone, so the checkpoint still moves.

Exactly-once is the Spark path's: the commit records the txn (MERGE_APP_ID, hi) and the
checkpoint's userMetadata in the same commit as the rows (delta-rs CommitProperties
app_transactions, docs/stack.md §11). Spark's Delta skips a write whose txn version is already
recorded; here the checkpoint is read first and a recorded hi skips the write. A commit racing
another job's commit of the same app id fails in delta-rs' conflict checker ("Concurrent
transaction failed", CommitFailedError), and merge_job retries the whole window, which reads the
checkpoint again.

Only replicas whose table features delta-rs writes go this way (`writable`): change data feed and
timestampNtz, no deletion vectors, column mapping or type widening; no soft deletes; and no
DECIMAL wider than EXACT_DECIMAL_STATS_DIGITS digits (BIGINT UNSIGNED and BIT(64) are DECIMAL(20,0)):
deltalake 1.6 writes a decimal's min/max file stats through an int64 or a float, clamped or rounded
above that, and Delta readers that skip files by those stats (Spark's `WHERE d = ...`, deltalake's
filters) then miss rows. With
change data feed on, delta-rs writes the MERGE's change files as Spark does; an append's inserts
are read from its added files. A checkpoint is written every CHECKPOINT_INTERVAL versions, the
cadence Spark's Delta keeps, so Spark readers of a replica merged only here replay short logs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidelake.failpoints import failpoint
from tidelake.lake.layout import LakeLayout
from tidelake.merge.txn_confs import delta_rs_commit_properties
from tidelake.merge.window_keys import last_changes, read_window_rows

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql.types import StructType

# Table features delta-rs writes as Spark does (a DATETIME column gives a replica timestampNtz).
# generatedColumns comes with every replica that moved from legacy writer version 4 to table
# features (a DDL turning timestampNtz on); delta-rs computes generation expressions on write
# (delta-io/delta-rs crates/core/src/operations/write/generated_columns.rs able_to_gc), and
# replicas have none.
_READER_FEATURES = frozenset({"timestampNtz"})
_WRITER_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "timestampNtz",
                              "generatedColumns"})
CHECKPOINT_INTERVAL = 10  # Spark's Delta default (delta.checkpointInterval)
# A float64 holds every decimal of up to 15 significant digits exactly (see the module doc).
EXACT_DECIMAL_STATS_DIGITS = 15
_READ_COLUMNS = ["table_id", "commit_ts", "op", "key", "value", "old_value", "flush_seq"]


def writable(replica: DeltaTable, target: StructType) -> bool:
    """Whether this replica may be written by delta-rs here (see the module doc)."""
    from pyspark.sql.types import DecimalType

    from tidelake.merge.soft_deletes import has_soft_deletes

    protocol = replica.protocol()
    if has_soft_deletes(target) or protocol.min_reader_version not in (1, 3):  # legacy 2: column mapping
        return False
    if any(isinstance(f.dataType, DecimalType) and f.dataType.precision > EXACT_DECIMAL_STATS_DIGITS
           for f in target.fields):
        return False
    if not set(protocol.reader_features or ()) <= _READER_FEATURES:
        return False
    if protocol.min_writer_version <= 4:  # legacy versions up to change data feed
        return True
    return protocol.min_writer_version == 7 and set(protocol.writer_features or ()) <= _WRITER_FEATURES


def read_window(layout: LakeLayout, physical_ids: Sequence[int], lo: int, hi: int) -> pa.Table:
    """The last change of each raw key of (lo, hi] (MOUNT_INPUT_COLUMNS), read with delta-rs."""
    return last_changes(read_window_rows(layout, physical_ids, lo, hi, _READ_COLUMNS))


def held_keys(collapsed: pa.Table) -> int:
    """Keys of the window that held a row at lo (a non-empty old value of their first change)."""
    import pyarrow.compute as pc

    held = pc.greater(pc.fill_null(pc.binary_length(collapsed["old_value"]), 0), 0)
    return int(pc.sum(pc.cast(held, "int64")).as_py() or 0)


def append(replica: DeltaTable, path: str, rows: pa.Table, hi: int) -> int:
    """Append `rows` (replica columns) in the commit that records `hi`; the rows written."""
    from deltalake import write_deltalake

    failpoint("merge.before_commit", path)
    write_deltalake(replica, rows, mode="append", commit_properties=delta_rs_commit_properties(hi))
    _checkpoint(replica)
    return rows.num_rows


def merge(replica: DeltaTable, path: str, source: pa.Table, condition: str, columns: Sequence[str],
          op_column: str, hi: int) -> tuple[int, int]:
    """One MERGE of the mounted `source`: (source rows, replica rows written)."""
    from tidelake.merge.replica_schema import quote

    op = f"s.{quote(op_column)}"
    failpoint("merge.before_commit", path)
    metrics = (replica.merge(source, condition, source_alias="s", target_alias="t",
                             commit_properties=delta_rs_commit_properties(hi))
               .when_matched_delete(f"{op} = 'delete'")
               .when_matched_update({quote(c): f"s.{quote(c)}" for c in columns})
               .when_not_matched_insert({quote(c): f"s.{quote(c)}" for c in columns}, f"{op} = 'put'")
               .execute())
    _checkpoint(replica)
    written = sum(int(metrics.get(k, 0)) for k in
                  ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted"))
    return int(metrics.get("num_source_rows", 0)), written


def record_only(replica: DeltaTable, path: str, hi: int) -> None:
    """A commit of the txn alone: a window without changes still moves the checkpoint."""
    failpoint("merge.before_commit", path)
    replica.create_write_transaction([], mode="append", schema=replica.schema(),
                                     partition_by=replica.metadata().partition_columns or None,
                                     commit_properties=delta_rs_commit_properties(hi))
    _checkpoint(replica)


def _checkpoint(replica: DeltaTable) -> None:
    """A checkpoint every CHECKPOINT_INTERVAL versions. The window's commit has landed by now, so a
    failed checkpoint is only logged, as Spark's Delta does: the next one covers it."""
    try:
        replica.update_incremental()
        if replica.version() % CHECKPOINT_INTERVAL == 0:
            replica.create_checkpoint()
    except Exception:  # noqa: BLE001 - see the docstring
        log.warning("checkpoint of replica %s failed after its commit; left for the next one", replica.table_uri,
                    exc_info=True)
