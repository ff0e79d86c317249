"""A changelog file deleted by hand fails the merge of its table (nothing applied) with one line
naming the file, the table and the recovery, in the merge report and in status; no Java stack."""

from __future__ import annotations

import glob
import os

import pytest
from merge.lake_fixtures import FedLake

from tidelake.lake.checkpoint import read_checkpoint
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.status.status_report import collect_status

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]


def test_a_deleted_changelog_file_is_named_by_the_merge_and_status(spark, tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    created = lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk")]))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1})
    lake.resolve()
    lake.close()
    removed = glob.glob(f"{lake.layout.changelog}/**/*.parquet", recursive=True)[0]
    os.remove(removed)

    report = run_merge(spark, lake.layout)
    [result] = report.tables
    assert result.status == MergeStatus.ERROR
    assert f"data file {removed} is missing" in result.reason and "tidelake bootstrap --table" in result.reason
    assert "\n" not in result.reason and "at org." not in result.reason
    [table] = collect_status(lake.layout).tables
    assert table.last_error == result.reason
    assert read_checkpoint(table.path, None) <= created  # the CREATE at most; the row's window not applied
