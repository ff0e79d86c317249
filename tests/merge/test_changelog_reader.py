"""Spark 4.2 + delta-spark reads what delta-rs landed; the window reader prunes and is exact."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.lander import Lander
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.layout import (
    CHANGELOG_SCHEMA,
    DDL_SCHEMA,
    WATERMARKS_SCHEMA,
    spark_ddl,
)
from tidelake.merge.changelog_reader import Window, read_window
from tidelake.merge.changelog_snapshot import ChangelogSnapshot

pytestmark = pytest.mark.spark
HOUR = 3_600_000


def job(job_id: int, table_id: int = 41) -> DdlRow:
    return DdlRow(job_id, 1000 + job_id, 50, 3, "create table", 2, "shop", table_id, "t",
                  "CREATE TABLE t (id INT)", "{}", "{}", "job")


def _spark_columns(df) -> str:
    return ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in df.schema.fields)


def _without_nullability(ddl: str) -> str:
    return ddl.replace(" NOT NULL", "")


@pytest.fixture
def landed(layout, make_rows, base_ms):
    """Three hours of two tables plus one other table, landed by a Lander in two flushes."""
    lander = Lander(layout, "cf-spark", flush_interval_s=3600)
    rows = [r for h in range(3) for t in (41, 42) for r in make_rows(t, 4, at_ms=base_ms + h * HOUR)]
    rows += make_rows(43, 3)
    lander.add_rows(rows[:10])
    lander.flush()
    lander.add_rows(rows[10:])
    lander.add_ddl([job(1), job(2, table_id=42)])
    lander.resolve(41, max(r.commit_ts for r in rows))
    lander.resolve_ddl(rows[-1].commit_ts)
    lander.close()
    return rows


def test_spark_reads_the_tables_delta_rs_wrote(spark, layout, landed):
    changelog = spark.read.format("delta").load(layout.changelog)
    assert _spark_columns(changelog) == _without_nullability(spark_ddl(CHANGELOG_SCHEMA))
    got = sorted((r.table_id, r.commit_ts, r.start_ts, r.op, bytes(r.key), bytes(r.value),
                  bytes(r.old_value), r.region_id) for r in changelog.collect())
    assert got == sorted((r.table_id, r.commit_ts, r.start_ts, r.op, r.key, r.value,
                          r.old_value, r.region_id) for r in landed)
    ddl = spark.read.format("delta").load(layout.ddl)
    assert _spark_columns(ddl) == _without_nullability(spark_ddl(DDL_SCHEMA))
    assert sorted(r.job_id for r in ddl.collect()) == [1, 2]
    watermarks = spark.read.format("delta").load(layout.watermarks)
    assert _spark_columns(watermarks) == _without_nullability(spark_ddl(WATERMARKS_SCHEMA))
    assert {(r.kind, r.table_id, r.resolved_ts) for r in watermarks.collect()} == {
        ("table", 41, max(r.commit_ts for r in landed)), ("ddl", 0, landed[-1].commit_ts)}
    assert ChangelogSnapshot(layout).bucket_seconds == 3600  # the size the lander created it with


def test_window_reader_is_exact_and_prunes_partitions(spark, layout, landed, base_ms):
    table_41 = [r for r in landed if r.table_id == 41]
    lo, hi = table_41[4].commit_ts, table_41[9].commit_ts  # (lo, hi] spans the 2nd and 3rd hour
    df = read_window(spark, layout, Window((41, 43), lo, hi), 3600)
    want = sorted((r.table_id, r.commit_ts) for r in landed
                  if r.table_id in (41, 43) and lo < r.commit_ts <= hi)
    assert sorted((r.table_id, r.commit_ts) for r in df.collect()) == want
    assert want and all(t == 41 for t, _ in want)

    # Only files of table 41 (43 has nothing in range), buckets of hours 2 and 3, are opened.
    allowed = {f"table_id=41/commit_bucket={bucket_label(r.commit_ts, 3600)}"
               for r in table_41[4:]}
    files = df.inputFiles()
    assert {f.split("/changelog/")[1].rsplit("/", 1)[0] for f in files} == allowed
    assert len(files) < len(DeltaTable(layout.changelog).file_uris())
    plan = df._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    assert "PartitionFilters" in plan and "commit_bucket" in plan
