"""One pass per merge run: the first windows of many tables read, collapsed and classified in one
Spark scan, cached as a global temp view the table threads' sessions share. Each table still
mounts and commits its own rows with its own txn: the pass only reads. Owner: the merge run.

More: docs/internals.md#run_pass.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidelake.lake.layout import LakeLayout
from tidelake.merge.changelog_reader import Window, collapse_last_change, read_windows
from tidelake.merge.changelog_snapshot import WindowKeys


@dataclass(frozen=True)
class RunPass:
    view: str  # global temp view of the collapsed windows, cached
    windows: Mapping[Hashable, Window]
    kinds: Mapping[Hashable, WindowKeys]

    def source(self, session: SparkSession, table: Hashable, lo: int, hi: int) -> tuple[DataFrame, WindowKeys] | None:
        """The collapsed changes of `table`'s window (lo, hi] in `session`, or None when the pass
        did not read that window."""
        window = self.windows.get(table)
        if window is None or (window.lo, window.hi) != (lo, hi):
            return None
        rows = session.table(f"global_temp.{self.view}").where(F.col("table_id").isin(list(window.table_ids)))
        return rows, self.kinds[table]


def open_pass(spark: SparkSession, layout: LakeLayout, windows: Mapping[Hashable, Window],
              bucket_seconds: int) -> RunPass:
    """Read, collapse and cache `windows` (table -> its first window), and classify their keys."""
    view = f"tidelake_pass_{uuid.uuid4().hex}"
    collapse_last_change(read_windows(spark, layout, list(windows.values()), bucket_seconds)) \
        .createOrReplaceGlobalTempView(view)
    spark.catalog.cacheTable(f"global_temp.{view}")
    try:
        rows = spark.table(f"global_temp.{view}")
        held = F.coalesce(F.length(rows["old_value"]), F.lit(0)) > 0
        counts = rows.groupBy("table_id").agg(
            F.count(F.lit(1)).alias("keys"), F.sum(held.cast("long")).alias("held")).collect()
    except BaseException:
        close_pass(spark, RunPass(view, {}, {}))
        raise
    by_pid = {int(r["table_id"]): (int(r["keys"]), int(r["held"] or 0)) for r in counts}
    kinds = {}
    for table, window in windows.items():
        keys, held_keys = (sum(by_pid.get(int(p), (0, 0))[i] for p in window.table_ids) for i in range(2))
        kinds[table] = WindowKeys(keys=keys, new=keys - held_keys)
    return RunPass(view, dict(windows), kinds)


def close_pass(spark: SparkSession, run_pass: RunPass) -> None:
    """Drop the pass's cache and view (a long-lived Spark Connect server would keep them)."""
    name = f"global_temp.{run_pass.view}"
    if spark.catalog.tableExists(name):
        spark.catalog.uncacheTable(name)
        spark.catalog.dropGlobalTempView(run_pass.view)
