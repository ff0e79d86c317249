"""Spark reader of the changelog window (lo, hi] of some physical tables, for merge.

The filter names both partition columns so Delta prunes files from the log before any Parquet
is opened: `table_id IN (...)` and a `commit_bucket` range derived from lo and hi with the
bucket size recorded in the table (not a config that could differ from what was landed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidelake.errors import InputError
from tidelake.lake.changelog_writer import bucket_label
from tidelake.lake.layout import (
    BUCKET_SECONDS_PROPERTY,
    DEFAULT_BUCKET_SECONDS,
    LakeLayout,
)

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
