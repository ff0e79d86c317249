"""The changefeed's start claimed by bootstrap (tidelake.bootstrap.handoff.claim_start)."""

from __future__ import annotations

from tidelake.bootstrap.handoff import claim_start
from tidelake.lake.ddl_log import start_snapshot_ts
from tidelake.lake.layout import LakeLayout
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import SchemaSnapshot


def test_bootstrap_claims_the_start_of_a_changefeed_on_a_cluster_with_no_table_yet(tmp_path):
    """Nothing selected at T still lands the start row: the puller's shards start at T too."""
    layout = LakeLayout(str(tmp_path / "lake"))
    ts = 470750628833394688
    claim_start(layout, "cf1", SchemaSnapshot(ts=ts, schema_version=1, dbs=[], tables={}), TableFilter.parse(["shop.*"]))
    assert start_snapshot_ts(layout) == ts
    claim_start(layout, "cf1", SchemaSnapshot(ts=ts, schema_version=1, dbs=[], tables={}), TableFilter.parse(["shop.*"]))
    assert start_snapshot_ts(layout) == ts  # idempotent per T
