"""Replica assets: stable URIs per changefeed table, and events only for replicas that moved; one
asset per Iceberg catalog."""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import quote

from tidelake import tso
from tidelake.orchestration.assets import (
    ReplicaVersion,
    asset_event_extra,
    changed_replicas,
    iceberg_catalog_asset_uri,
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


def test_the_iceberg_catalog_asset_names_its_database_and_catalog_never_its_credentials(tmp_path):
    from airflow.sdk import Asset

    from tidelake.config import ChangefeedConfig, IcebergConfig, LakeConfig, UpstreamConfig

    def config(lake: str, iceberg: IcebergConfig) -> ChangefeedConfig:
        return ChangefeedConfig("cf", UpstreamConfig(pd=("127.0.0.1:1",)), LakeConfig(lake), iceberg=iceberg)

    shared = IcebergConfig(enabled=True, catalog_uri="postgresql+psycopg2://airflow:s3cret@db.example.com:5432/airflow")
    uri = iceberg_catalog_asset_uri(config("s3://bucket/lake", shared))
    assert uri == "tidelake-iceberg://db.example.com:5432/airflow/tidelake"
    assert Asset(uri=uri).uri == uri
    # one asset per catalog: another lake publishing to the same catalog names the same asset
    assert iceberg_catalog_asset_uri(config("s3://other/lake", shared)) == uri
    local = iceberg_catalog_asset_uri(config(str(tmp_path / "lake"), IcebergConfig(enabled=True, catalog_name="demo")))
    assert local == f"tidelake-iceberg://localhost/{quote(str(tmp_path / 'lake' / '_tidelake' / 'iceberg' / 'catalog.db'), safe='')}/demo"
    assert not (tmp_path / "lake").exists()  # naming the asset creates nothing (DAG files are parsed often)
