"""Spark's reader of changelog windows (lo, hi] of some physical tables: one window for a merge,
or the first windows of many tables in one pass (tidelake.merge.run_pass); and the window
semantics' collapse rule run in Spark (tidelake.merge.window_spec). Owner: the merge.

The filter names both partition columns so Delta prunes files from the log before any Parquet is
opened: `table_id IN (...)` and a `commit_bucket` range from lo, hi and the bucket size the
changelog was created with (tidelake.merge.changelog_snapshot reads it once per run).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidelake.errors import InputError
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.layout import LakeLayout
from tidelake.lake.row_change import OP_PUT
from tidelake.merge.window_spec import COLLAPSED_COLUMNS, FIRST_CHANGE_ORDER, IS_PUT, LAST_CHANGE_ORDER


@dataclass(frozen=True)
class Window:
    """The changes (lo, hi] of some physical tables."""

    table_ids: tuple[int, ...]
    lo: int
    hi: int


def read_window(spark: SparkSession, layout: LakeLayout, window: Window, bucket_seconds: int) -> DataFrame:
    """Raw events of `window`; duplicates (same key, same commit_ts) are left to the caller to
    collapse."""
    if not window.table_ids:
        raise InputError("a changelog window needs at least one physical table id")
    if window.lo > window.hi:
        raise InputError(f"changelog window ({window.lo}, {window.hi}] is empty the wrong way round")
    return spark.read.format("delta").load(layout.changelog).where(_pruned([window], bucket_seconds) & _within(window))


def read_windows(spark: SparkSession, layout: LakeLayout, windows: Sequence[Window], bucket_seconds: int) -> DataFrame:
    """Raw events of every window in one read: pruned to the union of their partitions, then
    each physical table kept to its own window."""
    if not windows:
        raise InputError("read_windows needs at least one window")
    own = reduce(lambda a, b: a | b, [_within(w) for w in windows])
    return spark.read.format("delta").load(layout.changelog).where(_pruned(windows, bucket_seconds) & own)


def _pruned(windows: Sequence[Window], bucket_seconds: int):
    """The partition filter of `windows`: their physical ids and the buckets their ts span."""
    ids = sorted({int(t) for w in windows for t in w.table_ids})
    lo, hi = min(w.lo for w in windows), max(w.hi for w in windows)
    return (F.col("table_id").isin(ids)
            & F.col("commit_bucket").between(bucket_label(lo + 1, bucket_seconds), bucket_label(hi, bucket_seconds)))


def _within(window: Window):
    return (F.col("table_id").isin([int(t) for t in window.table_ids]) & (F.col("commit_ts") > F.lit(window.lo))
            & (F.col("commit_ts") <= F.lit(window.hi)))


def collapse_last_change(changes: DataFrame) -> DataFrame:
    """The window semantics' collapse in Spark: each raw key's last change by LAST_CHANGE_ORDER,
    with the old value of its first change by FIRST_CHANGE_ORDER (its row at lo). A raw key names
    its physical table, so windows of many tables collapse together."""
    derived = {IS_PUT: (F.col("op") == OP_PUT).alias(IS_PUT)}
    last_order = F.struct(*(derived.get(c, F.col(c)) for c in LAST_CHANGE_ORDER))
    last = F.max_by(F.struct(*(c for c in COLLAPSED_COLUMNS if c != "old_value")), last_order).alias("last")
    first_old = F.min_by(F.col("old_value"), F.struct(*FIRST_CHANGE_ORDER)).alias("old_value")
    return changes.groupBy("key").agg(last, first_old).select("last.*", "old_value")
