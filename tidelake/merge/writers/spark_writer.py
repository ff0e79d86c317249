"""The window semantics (tidelake.merge.window_spec) as Spark SQL: read and collapse the window in
Spark, decode it with mapInArrow, then ONE commit: an INSERT of new keys' puts, a MERGE, or for a
window without changes an insert-only MERGE of no rows (the checkpoint still moves).

Statements are SQL over a session temp view, not delta.tables: the same statement runs in a local
session and over Spark Connect, where DeltaTable needs Delta's Connect server plugin, which Maven
Central does not serve for Spark 4.2 (docs/stack.md#spark-connect-the-warm-spark). Each commit records the txn
(MERGE_APP_ID, hi) through the session's txn confs (tidelake.merge.txn_confs).
Owner: TableMerge, which chooses the writer.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from tidelake.failpoints import failpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import OP_PUT
from tidelake.merge.changelog_reader import Window, collapse_last_change, read_window
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.mount import mount
from tidelake.merge.replica_schema import DELETED_COLUMN, quote
from tidelake.merge.soft_deletes import has_soft_deletes
from tidelake.merge.txn_confs import txn_confs
from tidelake.merge.window_spec import Action, MergeSpec, Removal, can_append, removal_clause, replica_merge
from tidelake.merge.writers.replica_window import ReplicaWindow, commit_metrics
from tidelake.spark.temp_view import source_view

# Above this many changes (estimated from file stats) a window's keys are not told apart on the
# driver (tidelake.merge.changelog_snapshot holds them in memory): it goes through MERGE.
NEW_KEYS_CHECK_MAX_ROWS = 1_000_000


class SparkWriter:
    """Writes windows through one Spark session (its txn confs are per session)."""

    def __init__(self, spark: SparkSession, layout: LakeLayout, changelog: ChangelogSnapshot) -> None:
        self.spark = spark
        self.layout = layout
        self.changelog = changelog

    def write(self, window: ReplicaWindow) -> tuple[int, int]:
        spark, w = self.spark, window
        version = w.replica.version()
        soft = has_soft_deletes(w.target)
        if w.empty and w.removal is not None:  # a DDL's removal alone
            with txn_confs(spark, w.hi):
                failpoint("merge.before_commit", w.path)
                remove_rows(spark, w.path, w.target, w.removal)
            return commit_metrics(w, version)
        if w.empty:  # an insert-only MERGE of no rows never scans the replica
            with txn_confs(spark, w.hi), source_view(spark.createDataFrame([], w.target)) as view:
                failpoint("merge.before_commit", w.path)
                spark.sql(f"MERGE INTO delta.{quote(w.path)} t USING {view} s ON false "
                          "WHEN NOT MATCHED THEN INSERT *").collect()
            return commit_metrics(w, version)
        if w.shared is not None:
            collapsed, keys = w.shared
        else:
            changes = read_window(spark, self.layout, Window(w.physical_ids, w.lo, w.hi), self.changelog.bucket_seconds)
            collapsed = collapse_last_change(changes)
            keys = (self.changelog.window_keys(w.physical_ids, w.lo, w.hi)
                    if w.estimated_rows <= NEW_KEYS_CHECK_MAX_ROWS else None)
        if keys is not None and can_append(keys.held, w.recorded, w.lo, soft, w.removal):
            columns = ", ".join(quote(f.name) for f in w.target.fields)
            puts = mount(collapsed.where(F.col("op") == OP_PUT), w.info, w.target)
            with txn_confs(spark, w.hi), source_view(puts) as view:
                failpoint("merge.before_commit", w.path)
                spark.sql(f"INSERT INTO delta.{quote(w.path)} ({columns}) SELECT {columns} FROM {view}").collect()
            return commit_metrics(w, version, keys.keys)
        target = StructType([f for f in w.target.fields if f.name != DELETED_COLUMN]) if soft else w.target
        spec = replica_merge(w.info, [f.name for f in target.fields], soft, w.removal)
        with txn_confs(spark, w.hi):
            failpoint("merge.before_commit", w.path)
            run_merge_spec(spark, w.path, mount(collapsed, w.info, target), spec)
        return commit_metrics(w, version)


def run_merge_spec(spark: SparkSession, path: str, source: DataFrame, spec: MergeSpec) -> None:
    """MERGE `source` into the Delta table at `path` as `spec` says, under the caller's txn confs."""
    with source_view(source) as view:
        spark.sql(merge_statement(path, view, spec)).collect()


def remove_rows(spark: SparkSession, path: str, target: StructType, removal: Removal) -> None:
    """The rows `removal` names gone from the replica at `path` (its schema `target`) by a MERGE of no
    source rows: the removal clause of the window semantics (tidelake.merge.window_spec.removal_clause),
    a soft delete where the replica keeps them. A no-op when run again."""
    run_merge_spec(spark, path, spark.createDataFrame([], target),
                   MergeSpec("false", (removal_clause(removal, has_soft_deletes(target)),)))


def merge_statement(path: str, view: str, spec: MergeSpec) -> str:
    """`spec` as one Delta MERGE statement."""
    clauses = []
    for c in spec.clauses:
        head = f"WHEN {c.when.value.upper()}"
        if c.condition is not None:
            head += f" AND {c.condition}"
        if c.action == Action.DELETE:
            body = "DELETE"
        elif c.action == Action.UPDATE:
            body = "UPDATE SET " + ", ".join(f"t.{quote(column)} = {value}" for column, value in c.values)
        else:
            body = (f"INSERT ({', '.join(quote(column) for column, _ in c.values)}) "
                    f"VALUES ({', '.join(value for _, value in c.values)})")
        clauses.append(f"{head} THEN {body}")
    return f"MERGE INTO delta.{quote(path)} t USING {view} s ON {spec.on} " + " ".join(clauses)
