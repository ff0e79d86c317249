"""Replicas are readable by every Delta reader until a DDL needs a reader feature.

A replica of inserts, updates and deletes (no widening or renaming DDL) read with deltalake
(delta-rs) and with Polars equals Spark's read of the same Delta version; then a widening MODIFY
COLUMN and a RENAME COLUMN each add the reader feature they need, which `tidelake status` reports
(tidelake.lake.replica_readers), and deltalake refuses exactly what status says it cannot read.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from lake_fixtures import FedLake, sorted_rows

from tidelake.apply.replica_schema import COLUMN_MAPPING, creation_properties
from tidelake.lake.status import collect_status


def _spark_rows(spark, path: str, version: int) -> list[dict]:
    return sorted_rows([r.asDict() for r in spark.read.format("delta").option("versionAsOf", version).load(path).collect()])


def _merged(spark, lake: FedLake) -> tuple[str, int]:
    """Merge everything; the replica's path and its Delta version after the merge."""
    from deltalake import DeltaTable

    from tidelake.apply.merge_job import run_merge

    report = run_merge(spark, lake.layout, write_log=False)
    assert not report.failed, report.failed
    path = lake.layout.replica_path("shop", "orders")
    return path, DeltaTable(path).version()


def _status_of(lake: FedLake):
    return next(t for t in collect_status(lake.layout).tables if t.table == "shop.orders")


@pytest.mark.spark
def test_replicas_read_alike_by_deltalake_polars_and_spark_until_a_ddl_needs_a_feature(spark, tmp_path):
    import polars as pl
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaProtocolError

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("qty", "int"), ("note", "varchar(20)"),
                                                      ("amount", "decimal(10,2)"), ("at", "datetime")]))
    rows = [{"id": i, "qty": i * 3, "note": f"n{i}", "amount": Decimal(f"{i}.25"), "at": datetime(2026, 1, i, 8, i)}
            for i in range(1, 7)]
    with lake.txn() as t:
        for row in rows:
            t.put("shop", "orders", row)
    with lake.txn() as t:
        t.put("shop", "orders", {**rows[0], "note": None, "qty": -1})
        t.delete("shop", "orders", rows[1])
    upper = lake.resolve()
    path, version = _merged(spark, lake)

    spark_rows = _spark_rows(spark, path, version)
    assert spark_rows == lake.expected_rows("shop", "orders", upper)
    assert sorted_rows(DeltaTable(path, version=version).to_pyarrow_table().to_pylist()) == spark_rows
    assert sorted_rows(pl.read_delta(path, version=version).to_dicts()) == spark_rows
    status = _status_of(lake)
    assert (status.reader_features, status.deltalake_readable) == (["timestampNtz"], True)  # DATETIME

    lake.ddl(lake.up.modify_column("shop", "orders", "qty", "bigint"))  # widening: metadata only
    lake.resolve()
    path, _ = _merged(spark, lake)
    status = _status_of(lake)
    assert (status.reader_features, status.deltalake_readable) == (["timestampNtz", "typeWidening"], False)
    with pytest.raises(DeltaProtocolError, match="typeWidening"):
        DeltaTable(path).to_pyarrow_table()

    lake.ddl(lake.up.rename_column("shop", "orders", "note", "remark"))
    upper = lake.resolve()
    path, version = _merged(spark, lake)
    status = _status_of(lake)
    assert (status.reader_features, status.deltalake_readable) == (["columnMapping", "timestampNtz", "typeWidening"], False)
    assert _spark_rows(spark, path, version) == lake.expected_rows("shop", "orders", upper)


def test_a_new_replica_gets_column_mapping_only_when_a_column_name_needs_it():
    """Delta refuses ' ,;{}()\\n\\t=' in Parquet column names without column mapping; TiDB allows them."""
    from lake.ddl_jobs import Upstream

    up = Upstream()
    up.create_schema("s")
    up.create_table("s", "plain", [("id", "bigint", "pk"), ("v", "int")])
    up.create_table("s", "spaced", [("id", "bigint", "pk"), ("unit price", "int")])
    assert not COLUMN_MAPPING.items() & creation_properties(up.table("s", "plain")).items()
    assert COLUMN_MAPPING.items() <= creation_properties(up.table("s", "spaced")).items()
