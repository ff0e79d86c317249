"""How tidelake_merge plans around syncpoints: merges never pass the next unrecorded boundary,
and only runs that ask for everything take a cut (no Spark: the syncpoint log is delta-rs)."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from tidelake import tso
from tidelake.config import parse_config
from tidelake.lake.layout import LakeLayout
from tidelake.orchestration.merge_dag import syncpoint_cap, syncpoint_skip_reason
from tidelake.orchestration.params import MergeRequest
from tidelake.syncpoint.records import Syncpoint, next_boundary, record_syncpoint

EVERYTHING = MergeRequest(tables=None, until_ts=None, dry_run=False, groups=4)
T0 = tso.from_datetime(datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc))


def config(merge: dict | None = None):
    doc = {"changefeed": {"id": "cf"}, "upstream": {"pd": ["127.0.0.1:1"]}, "lake": {"root": "/tmp/x"}}
    if merge is not None:
        doc["merge"] = merge
    return parse_config(doc, "cf.toml")


def test_without_syncpoints_the_cap_is_the_runs_own(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    assert syncpoint_cap(layout, None, 123) == 123
    assert syncpoint_cap(layout, None, None) is None


def test_merges_stop_at_the_first_boundary_above_the_last_syncpoint(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    assert syncpoint_cap(layout, 60, None) is None  # before the first cut the syncpoint job picks S
    assert record_syncpoint(layout, Syncpoint(T0, []))
    boundary = next_boundary(T0, 60)
    assert tso.physical_ms(boundary) - tso.physical_ms(T0) == 60_000
    assert syncpoint_cap(layout, 60, None) == boundary
    assert syncpoint_cap(layout, 60, boundary + 5) == boundary
    assert syncpoint_cap(layout, 60, boundary - 5) == boundary - 5


def run(run_type: str):
    return {"dag_run": SimpleNamespace(run_type=run_type)}


def test_a_scheduled_or_manual_run_of_everything_takes_a_syncpoint():
    on = config({"syncpoint_interval": "1m"})
    assert syncpoint_skip_reason(on, EVERYTHING, run("scheduled")) is None
    assert syncpoint_skip_reason(on, EVERYTHING, run("manual")) is None


@pytest.mark.parametrize(
    ("merge", "request_", "run_type", "reason"),
    [
        (None, EVERYTHING, "scheduled", "syncpoints are off"),
        ({"syncpoint_interval": "1m"}, MergeRequest(None, None, True, 4), "manual", "dry run"),
        ({"syncpoint_interval": "1m"}, MergeRequest(("a.b",), None, False, 4), "manual", "only some tables"),
        ({"syncpoint_interval": "1m"}, MergeRequest(None, T0, False, 4), "manual", "until cap"),
        ({"syncpoint_interval": "1m"}, EVERYTHING, "backfill", "backfill run"),
    ],
)
def test_restricted_runs_take_no_syncpoint(merge, request_, run_type, reason):
    assert reason in syncpoint_skip_reason(config(merge), request_, run(run_type))


def test_a_syncpoint_is_not_due_until_the_ddl_watermark_passes_the_next_boundary(tmp_path):
    from merge.lake_fixtures import FedLake

    from tidelake.orchestration.merge_dag import syncpoint_not_due

    lake = FedLake(str(tmp_path / "lake"))
    assert syncpoint_not_due(lake.layout, None) is None
    assert syncpoint_not_due(lake.layout, 60) is None  # the first cut: the job decides
    assert record_syncpoint(lake.layout, Syncpoint(T0, []))
    boundary = next_boundary(T0, 60)
    lake.resolve(boundary - 1)
    assert "above the DDL watermark" in syncpoint_not_due(lake.layout, 60)
    lake.resolve(boundary)
    assert syncpoint_not_due(lake.layout, 60) is None
    lake.close()
