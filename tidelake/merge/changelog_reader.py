"""Spark reader of the changelog window (lo, hi] of some physical tables, for merge, and of the
windows of many tables at once (one pass per merge run); the collapse to each key's last change.

The filter names both partition columns so Delta prunes files from the log before any Parquet
is opened: `table_id IN (...)` and a `commit_bucket` range derived from lo and hi with the
bucket size recorded in the table (not a config that could differ from what was landed).

Last change per key: within a window a raw key's changes are ordered by commit ts; duplicates
of one (key, commit ts) are the same change landed twice (docs/design.md invariant 5) and
collapse; flush_seq only makes the pick deterministic. A raw key names its physical table, so
windows of many tables collapse together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidelake.errors import InputError
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.layout import (
    BUCKET_SECONDS_PROPERTY,
    DEFAULT_BUCKET_SECONDS,
    LakeLayout,
)
from tidelake.lake.row_change import OP_PUT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def changelog_bucket_seconds(spark: SparkSession, layout: LakeLayout) -> int:
    """Bucket size the changelog was created with (table property)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{layout.changelog}`").first()
    raw = (detail["properties"] or {}).get(BUCKET_SECONDS_PROPERTY)
    return int(raw) if raw else DEFAULT_BUCKET_SECONDS


def read_changes(
    spark: SparkSession,
    layout: LakeLayout,
    table_ids: Sequence[int],
    lo: int,
    hi: int,
    version: int | None = None,
    bucket_seconds: int | None = None,
) -> DataFrame:
    """Raw events of `table_ids` with lo < commit_ts <= hi, at changelog `version` (latest if
    None). Duplicates (same key, same commit_ts) are left to the caller to collapse."""
    from pyspark.sql import functions as F

    if not table_ids:
        raise InputError("read_changes needs at least one physical table id")
    if lo > hi:
        raise InputError(f"changelog window ({lo}, {hi}] is empty the wrong way round")
    seconds = bucket_seconds or changelog_bucket_seconds(spark, layout)
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(layout.changelog)
    return df.where(
        F.col("table_id").isin([int(t) for t in table_ids])
        & F.col("commit_bucket").between(bucket_label(lo + 1, seconds), bucket_label(hi, seconds))
        & (F.col("commit_ts") > F.lit(lo))
        & (F.col("commit_ts") <= F.lit(hi))
    )


@dataclass(frozen=True)
class Window:
    """The changes (lo, hi] of some physical tables."""

    table_ids: tuple[int, ...]
    lo: int
    hi: int


def read_windows(spark: SparkSession, layout: LakeLayout, windows: Sequence[Window], bucket_seconds: int) -> DataFrame:
    """Raw events of every window in one read: pruned to the union of their partitions, then
    each physical table kept to its own window."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not windows:
        raise InputError("read_windows needs at least one window")
    ids = sorted({int(t) for w in windows for t in w.table_ids})
    lo, hi = min(w.lo for w in windows), max(w.hi for w in windows)
    own = reduce(lambda a, b: a | b, [
        F.col("table_id").isin([int(t) for t in w.table_ids]) & (F.col("commit_ts") > F.lit(w.lo))
        & (F.col("commit_ts") <= F.lit(w.hi)) for w in windows])
    df = spark.read.format("delta").load(layout.changelog)
    return df.where(F.col("table_id").isin(ids)
                    & F.col("commit_bucket").between(bucket_label(lo + 1, bucket_seconds), bucket_label(hi, bucket_seconds))
                    & own)


def collapse_last_change(changes: DataFrame) -> DataFrame:
    """The last change of each raw key: highest commit ts, a put over a delete at the same ts,
    then the latest landing (flush_seq) among duplicates; its `old_value` is the one of the
    key's FIRST change, i.e. the row the replica holds for the key (tidelake.merge.mount)."""
    from pyspark.sql import functions as F

    order = F.struct(F.col("commit_ts"), (F.col("op") == OP_PUT).alias("is_put"), F.col("flush_seq"))
    columns = ["table_id", "commit_ts", "op", "key", "value"]
    last = F.max_by(F.struct(*columns), order).alias("last")
    first_old = F.min_by(F.col("old_value"), F.struct(F.col("commit_ts"), F.col("flush_seq"))).alias("old_value")
    return changes.groupBy("key").agg(last, first_old).select("last.*", "old_value")
