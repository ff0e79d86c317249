"""The Iceberg side of `make integration` at the smallest scale: the catalog database made beside
Airflow's on the throwaway PostgreSQL, the demo changefeed naming it under [iceberg], an s3://
lake (moto, credentials from the AWS variables as in the integration) published into it, read
right by pyiceberg and DuckDB at the cut, and the integration's own check finding the tags. The
Airflow-driven run (the syncpoint job publishing, verify's Spark side) is the integration's."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from consumers.iceberg_readers import assert_iceberg_reads_the_cut
from deltalake import write_deltalake

from tidelake import tso
from tidelake.config import load_config
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.demos.integration import ICEBERG_DATABASE, _check_iceberg, lake_environment
from tidelake.demos.on_airflow import write_demo_changefeed
from tidelake.demos.postgres import Postgres
from tidelake.demos.supervisor import StageFailed
from tidelake.lake.layout import WATERMARKS_SCHEMA, LakeLayout, open_or_create
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.syncpoint.records import ReplicaAt, Syncpoint, record_syncpoint

CUT = tso.compose(1_800_000_000_000)


@pytest.fixture
def postgres(tmp_path):
    server = Postgres(tmp_path / "pg")
    server.start()
    yield server
    server.remove()


def test_the_integration_publishes_an_s3_lake_into_its_postgres_catalog(postgres, s3_server, tmp_path, monkeypatch,
                                                                         capsys):
    catalog_uri = postgres.create_database(ICEBERG_DATABASE)
    root = s3_server.lake_root("integration-iceberg")
    for name, value in lake_environment(s3_server.endpoint).items():
        monkeypatch.setenv(name, value)
    config = load_config(write_demo_changefeed(tmp_path / "changefeed.toml", "127.0.0.1:2379", root, CUT - 100, "1m",
                                               iceberg_catalog_uri=catalog_uri))
    assert (config.iceberg.enabled, config.iceberg.catalog_uri) == (True, catalog_uri)
    layout = LakeLayout.from_config(config.lake)
    open_or_create(layout, layout.watermarks, WATERMARKS_SCHEMA)
    catalog = open_catalog(layout, config.iceberg)
    with pytest.raises(StageFailed, match="no replica of .* is published at a recorded syncpoint"):
        _check_iceberg(root, catalog_uri, print)

    orders = ReplicaCatalog(layout).assign(1, "demo", "orders", CUT - 10).path
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "note": ["a", None, "c"],
                     "amount": pa.array([Decimal("1.50"), None, Decimal("-3.25")], pa.decimal128(12, 2))})
    write_deltalake(orders, rows, storage_options=layout.storage_options)
    cut = Syncpoint(CUT, [ReplicaAt(1, "demo", "orders", orders, 0)])
    assert record_syncpoint(layout, cut)
    assert [p.table for p in sync_iceberg(catalog, layout).published] == ["demo.orders"]
    assert_iceberg_reads_the_cut(catalog, cut, layout)
    _check_iceberg(root, catalog_uri, print)
    assert f"1 of 1 tables tagged at a recorded syncpoint, newest syncpoint-{CUT}" in capsys.readouterr().out
