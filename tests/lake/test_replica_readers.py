"""Replicas stay readable by every Delta reader through DDL.

A replica of inserts, updates and deletes read with deltalake (delta-rs) and with Polars equals
Spark's read of the same Delta version and the upstream; a widening MODIFY COLUMN, a RENAME
COLUMN, a DROP COLUMN and an ADD COLUMN keep it so (the first three rewrite the replica instead of
enabling typeWidening or columnMapping), as `tidelake status` reports
(tidelake.lake.replica_readers). A replica that has column mapping from its creation keeps
following DDL in place.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest
from consumers.delta_readers import assert_duckdb_reads_as_deltalake, assert_same_rows, duckdb_read
from merge.lake_fixtures import FedLake, sorted_rows

from tidelake.merge.replica_schema import COLUMN_MAPPING, creation_properties
from tidelake.status.status_report import collect_status


def _spark_rows(spark, path: str, version: int) -> list[dict]:
    return sorted_rows([r.asDict() for r in spark.read.format("delta").option("versionAsOf", version).load(path).collect()])


def _merged(spark, lake: FedLake) -> tuple[str, int]:
    """Merge everything; the replica's path and its Delta version after the merge."""
    from deltalake import DeltaTable

    from tidelake.merge.merge_run import run_merge

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
    assert_duckdb_reads_as_deltalake(duckdb_read(lake.layout, "shop.orders", version), path, version)
    status = _status_of(lake)
    assert (status.reader_features, status.deltalake_readable) == (["timestampNtz"], True)  # DATETIME

    # DDLs that ALTER TABLE could only follow with a reader feature rewrite the replica instead
    for make_ddl in (lambda up: up.modify_column("shop", "orders", "qty", "bigint"),  # Delta would widen it
                     lambda up: up.rename_column("shop", "orders", "note", "remark"),
                     lambda up: up.drop_column("shop", "orders", "amount"),
                     lambda up: up.add_column("shop", "orders", ("region", "varchar(8)", {"default": "eu"}))):
        ddl = make_ddl(lake.up)
        lake.ddl(ddl)
        with lake.txn() as t:
            t.put("shop", "orders", {"id": 10 + len(lake.committed), "qty": 2**40})  # needs the BIGINT
        upper = lake.resolve()
        path, version = _merged(spark, lake)
        status = _status_of(lake)
        assert (status.reader_features, status.deltalake_readable) == (["timestampNtz"], True), ddl.query
        spark_rows = _spark_rows(spark, path, version)
        assert spark_rows == lake.expected_rows("shop", "orders", upper), ddl.query
        assert sorted_rows(DeltaTable(path, version=version).to_pyarrow_table().to_pylist()) == spark_rows, ddl.query
        assert sorted_rows(pl.read_delta(path, version=version).to_dicts()) == spark_rows, ddl.query
        assert_duckdb_reads_as_deltalake(duckdb_read(lake.layout, "shop.orders", version), path, version, ddl.query)
        for older in range(version):  # time travel to before each rewrite
            assert_duckdb_reads_as_deltalake(duckdb_read(lake.layout, "shop.orders", older), path, older, ddl.query)


@pytest.mark.spark
def test_a_rewrite_interrupted_before_its_checkpoint_is_not_done_twice(spark, tmp_path):
    """A crash after the rewrite's overwrite commit and before the commit that records the DDL's
    checkpoint (its failpoint, docs/nemesis.md#the-apply-level): the rerun finds the replica converged and only
    records the checkpoint."""
    from deltalake import DeltaTable

    from tidelake.failpoints import armed
    from tidelake.lake.checkpoint import read_checkpoint
    from tidelake.lake.schema_history import SchemaHistory
    from tidelake.merge.ddl_apply import apply_ddl, record_checkpoint

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    with lake.txn() as t:
        for i in range(3):
            t.put("shop", "orders", {"id": i, "note": f"n{i}"})
    lake.resolve()
    path, _ = _merged(spark, lake)
    ddl_ts = lake.ddl(lake.up.rename_column("shop", "orders", "note", "remark"))
    upper = lake.resolve()
    history = SchemaHistory.load(lake.layout)
    key = history.find("shop", "orders")
    event = next(e for e in history.ddl_events(key) if e.commit_ts == ddl_ts)

    record_checkpoint(spark, path, event.barrier)  # no change between the last merge and the DDL's barrier

    def crash(name: str, _owner: object) -> None:
        raise RuntimeError(f"killed at {name}")

    with armed(["ddl_apply.after_rewrite"], crash), pytest.raises(RuntimeError, match="killed at ddl_apply.after"):
        apply_ddl(spark, lake.layout, key, event)
    rewritten = DeltaTable(path).version()
    assert read_checkpoint(path) < ddl_ts and "remark" in DeltaTable(path).schema().to_arrow().names
    path, version = _merged(spark, lake)
    commits = DeltaTable(path).history(version - rewritten)  # the rerun's commits: no second rewrite
    assert commits and not [c for c in commits if c.get("operationParameters", {}).get("mode") == "Overwrite"]
    assert read_checkpoint(path) == upper
    assert _spark_rows(spark, path, version) == lake.expected_rows("shop", "orders", upper)
    assert _status_of(lake).deltalake_readable


@pytest.mark.spark
def test_a_replica_that_has_column_mapping_keeps_following_ddl_in_place(spark, tmp_path):
    """A column name Parquet cannot hold gives the replica column mapping at creation; its later
    RENAME COLUMN is then an ALTER TABLE (no rewrite), as no reader loses access by it."""
    from deltalake import DeltaTable

    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("unit price", "int")]))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "unit price": 5})
    lake.resolve()
    path, before = _merged(spark, lake)
    lake.ddl(lake.up.rename_column("shop", "orders", "unit price", "price each"))
    upper = lake.resolve()
    path, version = _merged(spark, lake)
    commits = DeltaTable(path).history(version - before)
    assert "RENAME COLUMN" in [c["operation"] for c in commits], commits
    assert not [c for c in commits if c.get("operationParameters", {}).get("mode") == "Overwrite"], commits
    assert _spark_rows(spark, path, version) == lake.expected_rows("shop", "orders", upper)
    # deltalake refuses column mapping: DuckDB is checked against Spark, before and after the rename
    for at in (before, version):
        assert_same_rows(duckdb_read(lake.layout, "shop.orders", at), _spark_rows(spark, path, at), at)
    assert duckdb_read(lake.layout, "shop.orders", version).schema.names == spark.read.format("delta").load(path).columns


def test_a_new_replica_gets_column_mapping_only_when_a_column_name_needs_it():
    """Delta refuses ' ,;{}()\\n\\t=' in Parquet column names without column mapping; TiDB allows them."""
    from lake.ddl_jobs import Upstream

    up = Upstream()
    up.create_schema("s")
    up.create_table("s", "plain", [("id", "bigint", "pk"), ("v", "int")])
    up.create_table("s", "spaced", [("id", "bigint", "pk"), ("unit price", "int")])
    assert not COLUMN_MAPPING.items() & creation_properties(up.table("s", "plain")).items()
    assert COLUMN_MAPPING.items() <= creation_properties(up.table("s", "spaced")).items()
