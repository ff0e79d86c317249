"""SCD type 2 history of a replica: one row per upstream version of each row (docs/history.md),
every upstream commit a version, with `_tidb_valid_from`, `_tidb_valid_to`, `_tidb_is_current`.

Exactly-once: the history table records its own checkpoint (HISTORY_APP_ID) and is written
BEFORE the replica's commit of each window and DDL, reading from its own checkpoint, so after a
crash it is at most one step ahead and its MERGE matches versions already present. A small
window's MERGE or DDL step at its ts runs on the driver (delta-rs, writers.history_rows), the
rest on Spark. Owner: TableMerge.

More: docs/internals.md#scd2_history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window as SqlWindow
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType

from tidelake.codec.schema import TableInfo
from tidelake.errors import InputError
from tidelake.lake.checkpoint import MERGE_APP_ID, open_replica
from tidelake.lake.history_table import HISTORY_APP_ID, SINCE_PROPERTY
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import OP_PUT
from tidelake.merge.changelog_reader import Window, read_window
from tidelake.merge.changelog_snapshot import ChangelogSnapshot
from tidelake.merge.decimal_stats import STATS_COLUMNS, stats_columns
from tidelake.merge.mount import mount
from tidelake.merge.replica_schema import (
    COLUMN_MAPPING,
    COMMIT_TS_COLUMN,
    DELETED_COLUMN,
    delta_struct,
    key_columns,
    quote,
    read_replica_struct,
)
from tidelake.merge.table_plan import FileStat
from tidelake.merge.txn_confs import txn_confs, writer_txn_options
from tidelake.merge.window_spec import IS_PUT, LAST_CHANGE_ORDER, OP_COLUMN, history_merge, match_columns
from tidelake.merge.writers.delta_rs_writer import keep_checkpoint_cadence, merge_arrow, record_if_unchanged, writable
from tidelake.merge.writers.driver_features import column_mapping_by_name
from tidelake.merge.writers.history_rows import (
    CURRENT_COLUMN,
    KIND_COLUMN,
    VALID_FROM_COLUMN,
    VALID_TO_COLUMN,
    VERSION_COLUMNS,
    empty_source,
    history_rows,
    mount_struct,
    source_struct,
    version_count,
)
from tidelake.merge.writers.spark_writer import run_merge_spec

_NEXT_TS = "_tidelake_next_ts"
_FIRST = "_tidelake_first"


def history_struct(replica: StructType) -> StructType:
    """The history table's schema for a replica schema."""
    clash = [f.name for f in replica.fields if f.name.lower() in VERSION_COLUMNS]
    if clash:
        raise InputError(f"replica column {clash[0]!r} clashes with a history table column")
    fields = [f for f in replica.fields if f.name not in (COMMIT_TS_COLUMN, DELETED_COLUMN)]
    return StructType([*fields, StructField(VALID_FROM_COLUMN, LongType(), True),
                       StructField(VALID_TO_COLUMN, LongType(), True), StructField(CURRENT_COLUMN, BooleanType(), True)])


def create_history(spark: SparkSession, replica_path: str, path: str, info: TableInfo,
                   storage_options: dict[str, str] | None = None) -> bool:
    """Create the history table at `path`, seeded from the replica (of `info`, its schema at the
    checkpoint) at its checkpoint, in one commit recording that checkpoint, then record that
    checkpoint as SINCE_PROPERTY (a DataFrame write sets only `delta.` properties). Its wide
    decimals get no statistics from the start (decimal_stats.stats_columns, keyed as the replica).
    False when it exists already or the replica has no checkpoint yet."""
    existing = open_replica(path, storage_options)
    if existing is not None:
        if SINCE_PROPERTY not in existing.metadata().configuration:  # a crash after the first commit
            _set_since(spark, path, open_replica(path, storage_options, version=0).transaction_version(HISTORY_APP_ID))
        return False
    replica = open_replica(replica_path, storage_options)
    checkpoint = None if replica is None else replica.transaction_version(MERGE_APP_ID)
    if checkpoint is None:
        return False
    rows = spark.read.format("delta").option("versionAsOf", replica.version()).load(replica_path)
    if DELETED_COLUMN in rows.columns:  # a soft-deleted row is no version valid now
        rows = rows.where(~F.coalesce(F.col(DELETED_COLUMN), F.lit(False)))
    schema = history_struct(read_replica_struct(replica_path, storage_options))
    seeded = rows.select(
        *(F.col(quote(f.name)) for f in schema.fields if f.name not in VERSION_COLUMNS),
        F.col(COMMIT_TS_COLUMN).alias(VALID_FROM_COLUMN), F.lit(None).cast("bigint").alias(VALID_TO_COLUMN),
        F.lit(True).alias(CURRENT_COLUMN))
    stats = stats_columns(schema, key_columns(info))
    properties = {} if stats is None else {STATS_COLUMNS: stats}
    if column_mapping_by_name(replica):
        properties.update(COLUMN_MAPPING)  # names Parquet cannot hold without it, or renamed columns
    writer = seeded.write.format("delta").mode("append")
    for key, value in {**properties, **writer_txn_options(checkpoint, HISTORY_APP_ID)}.items():
        writer = writer.option(key, value)
    writer.save(path)
    _set_since(spark, path, checkpoint)
    return True


def _set_since(spark: SparkSession, path: str, ts: int) -> None:
    spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{SINCE_PROPERTY}' = '{int(ts)}')")


def write_history(
    spark: SparkSession | None,
    layout: LakeLayout,
    path: str,
    info: TableInfo,
    physical_ids: Sequence[int],
    hi: int,
    bucket_seconds: int,
    stats: Sequence[FileStat] | None = None,
    stats_from: int | None = None,
    changelog: ChangelogSnapshot | None = None,
    check: Callable[[int], None] | None = None,
) -> int:
    """Bring the history table at `path` from its checkpoint h up to `hi`: every change of
    (h, hi] of `physical_ids`, decoded with `info`, in ONE commit recording hi. Returns the versions
    written (0 when h >= hi: done already). `stats` (changelog file stats from `stats_from` on) let
    a window with no file skip the read; no physical ids (a dropped table) is an empty commit.
    `changelog` (the run's snapshot, given for a small window) has the driver write it with
    delta-rs when the history table's protocol and columns allow (delta_rs_writer.writable) and
    it is not behind `stats_from` (the window's start), as the replica's small windows are; Spark
    otherwise. `check` (the caller's refusal) is given h before anything is written, read on the
    log this step writes to, so the history table is opened once per step."""
    table = open_replica(path, layout.storage_options)
    h = None if table is None else table.transaction_version(HISTORY_APP_ID)
    if h is None:
        raise InputError(f"no history table at {path}")
    if check is not None:
        check(h)
    if h >= hi:
        return 0
    history = delta_struct(table)
    # A history behind the window's start reads more than the window the caller sized: Spark's.
    on_driver = changelog is not None and writable(table, history) and (stats_from is None or h >= stats_from)
    if not on_driver and spark is None:
        raise InputError(f"history table {path} at {h}: its step to {hi} needs Spark (too large, behind its "
                         "replica, or a protocol the driver does not write), and this run has no Spark session")
    nothing_landed = stats is not None and stats_from is not None and stats_from <= h \
        and not any(s.max_ts > h and s.min_ts <= hi for s in stats)
    if not physical_ids or nothing_landed:  # no physical table (a drop, a recover) or no file: no read
        empty = empty_source(history) if on_driver else spark.createDataFrame([], source_struct(history))
        _commit(spark, path, empty, info, history, hi, table)
        return 0
    if on_driver:
        source = history_rows(changelog.key_changes(physical_ids, h, hi), info, history)
        _commit(spark, path, source, info, history, hi, table)
        return version_count(source)
    changes = read_window(spark, layout, Window(tuple(physical_ids), h, hi), bucket_seconds)
    source = history_source(changes, info, history).cache()
    try:
        versions = source.where(source[KIND_COLUMN] == "version").count()
        _commit(spark, path, source, info, history, hi)
    finally:
        source.unpersist()
    return versions


def history_source(changes: DataFrame, info: TableInfo, history: StructType) -> DataFrame:
    """The MERGE source of a window's raw changes: a 'version' row per put (valid_from its commit
    ts, valid_to the key's next change) and a 'close' row per key at its first change, keyed by the
    key's columns before that change (a common handle's PK as it was: mount's match columns).
    Changes landed twice are one (the collapse order of tidelake.merge.window_spec within a ts)."""
    derived = {IS_PUT: F.col("op") == OP_PUT}
    one = SqlWindow.partitionBy("key", "commit_ts").orderBy(
        *(derived.get(c, F.col(c)).desc() for c in LAST_CHANGE_ORDER if c != "commit_ts"))
    by_key = SqlWindow.partitionBy("key").orderBy("commit_ts")
    ordered = (changes.withColumn("_n", F.row_number().over(one)).where(F.col("_n") == 1)
               .withColumn(_NEXT_TS, F.lead("commit_ts").over(by_key))
               .withColumn(_FIRST, F.row_number().over(by_key) == 1))
    mounted = mount(ordered, info, mount_struct(history), carried=(_NEXT_TS, _FIRST))
    row_columns = [f for f in history.fields if f.name not in VERSION_COLUMNS]
    versions = mounted.where(F.col(OP_COLUMN) == OP_PUT).select(
        *(F.col(quote(f.name)) for f in row_columns),
        F.col(COMMIT_TS_COLUMN).alias(VALID_FROM_COLUMN), F.col(_NEXT_TS).alias(VALID_TO_COLUMN),
        F.col(_NEXT_TS).isNull().alias(CURRENT_COLUMN), F.lit("version").alias(KIND_COLUMN))
    keys, before = key_columns(info), match_columns(info)
    closes = mounted.where(F.col(_FIRST)).select(
        *((F.col(quote(before.get(f.name, f.name))) if f.name in keys else F.lit(None).cast(f.dataType)).alias(f.name)
          for f in row_columns),
        F.col(COMMIT_TS_COLUMN).alias(VALID_FROM_COLUMN), F.lit(None).cast("bigint").alias(VALID_TO_COLUMN),
        F.lit(None).cast("boolean").alias(CURRENT_COLUMN), F.lit("close").alias(KIND_COLUMN))
    return versions.unionByName(closes)


def _commit(spark: SparkSession | None, path: str, source: DataFrame | pa.Table, info: TableInfo,
            history: StructType, hi: int, table: DeltaTable | None = None) -> None:
    """One MERGE of `source` recording hi: close the open versions, add (or match again) the new
    ones; an Arrow source by delta-rs into `table` (the history's log, opened for this step)."""
    spec = history_merge(info, [f.name for f in history.fields], KIND_COLUMN, *VERSION_COLUMNS)
    if not isinstance(source, pa.Table):
        with txn_confs(spark, hi, HISTORY_APP_ID):
            run_merge_spec(spark, path, source, spec)
        return
    if source.num_rows:
        merge_arrow(table, source, spec, hi, HISTORY_APP_ID)  # leaves the handle at its commit
    # a MERGE that changes no row (closes of keys with no open version) makes no commit
    if not record_if_unchanged(table, path, hi, HISTORY_APP_ID):
        keep_checkpoint_cadence(table, at_commit=True)


def close_versions(spark: SparkSession, path: str, ts: int, where: str | None = None) -> None:
    """End every version still current before `ts` (TRUNCATE TABLE, DROP/TRUNCATE PARTITION at
    ts); `where` narrows it to some rows. Versions starting at ts are the DDL's own rows, kept."""
    vf, vt, cur = (quote(c) for c in VERSION_COLUMNS)
    condition = f"{vt} IS NULL AND {vf} < {int(ts)}" + (f" AND ({where})" if where else "")
    spark.sql(f"UPDATE delta.{quote(path)} SET {vt} = {int(ts)}, {cur} = false WHERE {condition}").collect()
