"""Layout contract: paths, schemas as created in Delta, bucket labels."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.errors import InputError
from tidelake.lake.commit_buckets import bucket_label
from tidelake.lake.layout import (
    BUCKET_SECONDS_PROPERTY,
    CHANGELOG_SCHEMA,
    DDL_SCHEMA,
    WATERMARKS_SCHEMA,
    LakeLayout,
    spark_ddl,
)
from tidelake.tso import compose


def test_paths_live_under_tidelake_dir():
    layout = LakeLayout("s3://bucket/lake/")
    assert layout.changelog == "s3://bucket/lake/_tidelake/changelog"
    assert layout.ddl == "s3://bucket/lake/_tidelake/ddl"
    assert layout.watermarks == "s3://bucket/lake/_tidelake/watermarks"
    assert layout.syncpoints == "s3://bucket/lake/_tidelake/syncpoints"
    assert layout.replica_path("shop", "orders") == "s3://bucket/lake/shop/orders"


@pytest.mark.parametrize("db,table", [("a/b", "t"), ("db", ".."), ("_tidelake", "t"), ("db", "")])
def test_replica_path_rejects_names_that_escape_the_folder(db, table):
    with pytest.raises(InputError):
        LakeLayout("/lake").replica_path(db, table)


def test_tables_are_created_with_the_contract_schemas(layout):
    ChangelogWriter(layout, "tidelake-puller/cf", bucket_seconds=600)
    DdlWriter(layout, "tidelake-puller/cf")
    WatermarkWriter(layout, "tidelake-puller/cf")
    changelog = DeltaTable(layout.changelog)
    assert pa.schema(changelog.schema().to_arrow()).equals(CHANGELOG_SCHEMA)
    assert changelog.metadata().partition_columns == ["table_id", "commit_bucket"]
    assert changelog.metadata().configuration[BUCKET_SECONDS_PROPERTY] == "600"
    assert pa.schema(DeltaTable(layout.ddl).schema().to_arrow()).equals(DDL_SCHEMA)
    watermarks = DeltaTable(layout.watermarks)
    assert pa.schema(watermarks.schema().to_arrow()).equals(WATERMARKS_SCHEMA)
    assert watermarks.metadata().partition_columns == ["puller"]


def test_existing_bucket_size_wins_over_config(layout):
    ChangelogWriter(layout, "tidelake-puller/cf", bucket_seconds=600)
    assert ChangelogWriter(layout, "tidelake-puller/cf", bucket_seconds=3600).bucket_seconds == 600


def test_spark_ddl_lists_every_column_with_nullability():
    ddl = spark_ddl(CHANGELOG_SCHEMA)
    assert ddl.startswith("table_id BIGINT NOT NULL, commit_bucket STRING NOT NULL")
    assert "key BINARY NOT NULL" in ddl
    assert ddl.count(",") == len(CHANGELOG_SCHEMA) - 1
    assert "table_info STRING," in spark_ddl(DDL_SCHEMA)


def test_bucket_label_is_the_utc_bucket_start():
    # 2026-11-21 13:59:59.999 UTC and 14:00:00.000 UTC, logical parts set
    ms = 1795269599999
    assert bucket_label(compose(ms, 5), 3600) == "2026-11-21T1300Z"
    assert bucket_label(compose(ms + 1, 0), 3600) == "2026-11-21T1400Z"
    assert bucket_label(compose(ms + 1, 0), 86400) == "2026-11-21T0000Z"
    assert bucket_label(compose(ms, 0), 900) == "2026-11-21T1345Z"


def test_bucket_labels_sort_like_time():
    ms = [0, 60_000, 3_600_000, 36_000_000, 1795269600000]
    labels = [bucket_label(compose(m), 60) for m in ms]
    assert labels == sorted(labels)
    assert len(set(labels)) == len(labels)
