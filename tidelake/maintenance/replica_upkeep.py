"""Compaction and VACUUM of one replica (or history table) by the engine that may write it: delta-rs on
the driver when it may (the merge's own test, tidelake.merge.writers.delta_rs_writer.writable), else
Delta SQL on Spark. A Spark statement carries a fixed cost (a job, the JVM replaying the log) that
dominates a small replica's upkeep; the delta-rs commit has not. Both make the same commits: an
OPTIMIZE with dataChange=false (the checkpoint's txn stays) and a VACUUM of the files no version
within the retention references, orphans from failed writes included. Every commit carries the
replica lease's fencing token. Owner: tidelake.maintenance.lake_upkeep.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from deltalake import DeltaTable
from deltalake.transaction import CommitProperties

from tidelake.merge.replica_schema import delta_struct, quote
from tidelake.merge.txn_confs import USER_METADATA_CONF, fenced, session_confs
from tidelake.merge.writers.delta_rs_writer import keep_checkpoint_cadence, writable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DELTA_RS = "delta-rs"
SPARK = "spark"


def upkeep_engine(table: DeltaTable) -> str:
    """DELTA_RS when delta-rs may write `table` as the merge would, else SPARK."""
    return DELTA_RS if writable(table, delta_struct(table)) else SPARK


def compact(spark: SparkSession, path: str, table: DeltaTable, engine: str) -> int:
    """Bin-pack the small files of the table at `path` (opened as `table`) in one dataChange=false
    commit; the files it removed."""
    if engine == DELTA_RS:
        metrics = table.optimize.compact(commit_properties=_commit_properties())
        keep_checkpoint_cadence(table)
        return int(metrics.get("numFilesRemoved", 0))
    # Delta SQL rather than delta.tables.DeltaTable, so maintenance also runs over Spark Connect.
    with session_confs(spark, {USER_METADATA_CONF: fenced("{}")}):
        metrics = spark.sql(f"OPTIMIZE delta.{quote(path)}").collect()[0]["metrics"]
    return int(metrics["numFilesRemoved"])


def vacuum(spark: SparkSession, path: str, table: DeltaTable, engine: str, retention_hours: float) -> None:
    """Delete the files no version of the last `retention_hours` references (delta-rs keeps whole
    hours: the retention is rounded up, never down). `table` is the one `compact` was given, if any."""
    if engine == DELTA_RS:
        table.update_incremental()
        table.vacuum(retention_hours=math.ceil(retention_hours), dry_run=False, enforce_retention_duration=False,
                     full=True, commit_properties=_commit_properties())
        keep_checkpoint_cadence(table)
        return
    with session_confs(spark, {USER_METADATA_CONF: fenced("{}")}):
        spark.sql(f"VACUUM delta.{quote(path)} RETAIN {float(retention_hours)!r} HOURS").collect()


def _commit_properties() -> CommitProperties:
    return CommitProperties(custom_metadata={"userMetadata": fenced("{}")})
