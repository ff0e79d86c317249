"""Maintenance: changelog retention below each replica's checkpoint (including a truncated table's
retired physical id), OPTIMIZE compacting a replica's files, VACUUM deleting the compacted ones."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lake.ddl_jobs import DdlFeed, Upstream

from tidelake import tso
from tidelake.apply.maintenance import changelog_checkpoints, run_maintenance
from tidelake.lake.changelog_writer import ChangelogWriter, commit_properties
from tidelake.lake.checkpoint import MERGE_APP_ID, read_checkpoint
from tidelake.lake.ddl_log import DdlLog
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.row_change import RowChange
from tidelake.lake.schema_history import SchemaHistory

HOUR = 3_600_000 << 18  # one hour of TSO (one changelog commit bucket)
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _replica_commit(path, ts):
    write_deltalake(path, pa.table({"id": [ts]}, schema=SCHEMA), mode="append",
                    commit_properties=commit_properties(MERGE_APP_ID, ts))


def _change(table_id, ts):
    return RowChange(table_id, ts, ts - 1, "put", b"t" + ts.to_bytes(8, "big"), b"v", b"", 1)


def _parquet_files(path):
    return sorted(p.name for p in Path(path).glob("*.parquet"))


@pytest.mark.spark
@pytest.mark.timeout(1800)  # a handful of Delta commits; slow only on a loaded machine
def test_retention_optimize_vacuum(spark, tmp_path):
    layout = LakeLayout(str(tmp_path))
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_table("shop", "a", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    old_id = up.table("shop", "a").id
    start = up.ts
    up.ts += 2 * HOUR
    feed.run(up.truncate_table("shop", "a"))  # retires old_id two buckets later
    new_id = up.table("shop", "a").id
    truncated = up.ts
    DdlLog(layout, "puller").insert(feed.rows, 1)
    catalog = ReplicaCatalog(layout)
    key = SchemaHistory(feed.rows).tables()[0]
    path = catalog.assign(key, "shop", "a", start).path
    _replica_commit(path, start)
    _replica_commit(path, truncated + HOUR)  # merged one bucket past the truncate
    ChangelogWriter(layout, "puller").append(
        [_change(old_id, start + 1), _change(old_id, start + HOUR), _change(new_id, truncated + 1),
         _change(new_id, truncated + 3 * HOUR), _change(999, start + 1)], 1)

    history = SchemaHistory.load(layout)
    assert changelog_checkpoints(layout, history, catalog) == {old_id: truncated + HOUR, new_id: truncated + HOUR}
    files_before = _parquet_files(path)
    assert len(files_before) == 2

    report = run_maintenance(spark, layout, vacuum_retention_hours=0)
    left = DeltaTable(layout.changelog).to_pyarrow_table(columns=["table_id", "commit_ts"]).to_pylist()
    # whole buckets below the checkpoint's bucket went, for the retired id too; later buckets stay;
    # table 999 has no replica and keeps everything
    assert sorted((r["table_id"], r["commit_ts"]) for r in left) == sorted(
        [(new_id, truncated + 3 * HOUR), (999, start + 1)])
    assert report.changelog_rows_deleted == 3
    assert report.optimized[path] == 2 and path in report.vacuumed and layout.changelog in report.vacuumed
    files_after = _parquet_files(path)
    assert len(files_after) == 1 and not set(files_after) & set(files_before)  # compacted, old ones vacuumed
    assert read_checkpoint(path) == truncated + HOUR  # OPTIMIZE keeps the checkpoint
    assert sorted(r["id"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()) == [start, truncated + HOUR]
