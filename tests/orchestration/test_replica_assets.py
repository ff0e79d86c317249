"""Replica assets: stable URIs per changefeed table, and events only for replicas that moved."""

from __future__ import annotations

from datetime import datetime, timezone

from tidelake import tso
from tidelake.orchestration.assets import (
    ReplicaVersion,
    asset_event_extra,
    changed_replicas,
    replica_asset_uri,
)


def test_uri_names_changefeed_db_and_table_and_is_valid_for_airflow():
    from airflow.sdk import Asset

    uri = replica_asset_uri("shop-to-lake", "shop.order items")
    assert uri == "tidelake://shop-to-lake/shop/order%20items"
    assert Asset(uri=uri).uri == uri
    assert replica_asset_uri("cf", "a.b") != replica_asset_uri("cf2", "a.b")


def test_event_extra_carries_checkpoint_and_delta_version():
    ts = tso.from_datetime(datetime(2026, 5, 1, 8, 30, tzinfo=timezone.utc)) + 7
    extra = asset_event_extra(ReplicaVersion(checkpoint_ts=ts, delta_version=12))
    assert extra == {"checkpoint_ts": ts, "checkpoint_time": "2026-05-01T08:30:00+00:00", "delta_version": 12}


def test_only_new_commits_produce_events():
    before = {"a.x": ReplicaVersion(10, 3), "a.y": ReplicaVersion(10, 3), "a.z": None}
    after = {"a.x": ReplicaVersion(10, 3), "a.y": ReplicaVersion(20, 4), "a.z": ReplicaVersion(5, 0),
             "a.new": ReplicaVersion(7, 1), "a.ddl": ReplicaVersion(10, 9)}
    changed = changed_replicas({**before, "a.ddl": ReplicaVersion(10, 5)}, after)
    assert list(changed) == ["a.ddl", "a.new", "a.y", "a.z"]
