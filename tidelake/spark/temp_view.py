"""A DataFrame as a SQL table name for one statement (MERGE INTO ... USING <view>).

Delta's SQL DML works the same in a local session and over Spark Connect, where the DataFrame
API of delta.tables is not available (tidelake.spark.spark_session). A temp view is per session, so
sessions merging at once never see each other's views; the name is unique all the same, and the
view is dropped afterwards so a long-lived Connect session does not collect them.
Owner: the Spark writer and the merge's DDL apply.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@contextmanager
def source_view(df: DataFrame) -> Iterator[str]:
    """Yield the name of a temp view of `df`, dropped on exit."""
    name = f"tidelake_source_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(name)
    try:
        yield name
    finally:
        df.sparkSession.catalog.dropTempView(name)
