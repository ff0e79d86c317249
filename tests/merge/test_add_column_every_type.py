"""ADD COLUMN of every type-zoo type on every kind of replica, then rows merged into the new columns
through both writers; each replica equals the upstream replay (lake_fixtures.FedLake.expected_rows).

A DATETIME column maps to TIMESTAMP_NTZ, whose Delta table feature Delta turns on by itself only
when it creates a table: a replica created without one took no such column by ALTER TABLE. A
DECIMAL wider than the driver writes stats of exactly (BIGINT UNSIGNED is DECIMAL(20,0)) gets no
file stats once added (tidelake.merge.decimal_stats), so the driver's kinds take it too.
"""

from __future__ import annotations

import random
from datetime import timezone

import pytest
from consumers.delta_readers import assert_duckdb_reads_as_deltalake, assert_same_rows, duckdb_read, duckdb_read_path
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake, by_driver, replica_rows
from pyspark.sql.types import StructType, TimestampType

from tidelake.bootstrap.replica_write import write_replica
from tidelake.config import HistoryConfig
from tidelake.lake.history_table import history_path
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge import table_merge
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import run_merge
from tidelake.merge.replica_schema import read_replica_struct, replica_struct
from tidelake.merge.writers import delta_rs_writer
from tidelake.sim.tidb.types import parse_field_type
from tidelake.sim.tidb.values import random_value
from tidelake.sim.workload import NO_DEFAULT_TYPES, ZOO_TYPES

pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]

DB = "zoo"
# table -> how its replica is made and written
KINDS = {
    "rs_driver": "created by delta-rs, merged on the driver",
    "rs_spark": "created by delta-rs, merged by Spark",
    "mapped": "created by Spark with column mapping (a column name Parquet cannot hold), merged on the driver "
              "(the window rewrite, by physical names)",
    "boot": "written by bootstrap, merged on the driver",
    "hist": "with an SCD2 history table and soft deletes, merged on the driver",
}
ON_DRIVER = ("rs_driver", "mapped", "boot", "hist")
HISTORY = HistoryConfig(scd2=(f"{DB}.hist",), soft_deletes=(f"{DB}.hist",))


def _added(table: str) -> list[tuple[str, str]]:
    """Every zoo type, on every kind of replica."""
    return [(f"c_{i}", spec) for i, spec in enumerate(ZOO_TYPES)]


def _columns(table: str) -> list[tuple]:
    return [("id", "bigint", "pk"), ("v", "int")] + ([("a b", "int")] if table == "mapped" else [])


def _added_specs(table: str, rng: random.Random) -> list[tuple]:
    """The table's zoo types; every other column with a default, so the rows already there take it."""
    return [(name, spec, {"default": random_value(parse_field_type(spec), rng)})
            if i % 2 == 0 and spec not in NO_DEFAULT_TYPES else (name, spec)
            for i, (name, spec) in enumerate(_added(table))]


def _row(fed: FedLake, table: str, key: int, rng: random.Random, with_added: bool) -> dict:
    info = fed.up.table(DB, table)
    row = {"id": key, "v": rng.randint(0, 1000)}
    if table == "mapped":
        row["a b"] = key
    if with_added:
        for name, _ in _added(table):
            if rng.random() < 0.1:
                row[name] = None
            else:
                row[name] = random_value(info.column_by_name(name).field_type, rng)
    return row


def test_every_type_zoo_column_added_to_every_replica_kind_takes_rows_through_both_writers(spark, tmp_path, monkeypatch):
    rng = random.Random(33)
    fed = FedLake(str(tmp_path / "lake"))
    fed.ddl(fed.up.create_schema(DB))
    created = {table: fed.ddl(fed.up.create_table(DB, table, _columns(table))) for table in KINDS}
    boot = fed.up.table(DB, "boot")
    write_replica(spark, fed.layout.replica_path(DB, "boot"), boot,
                  spark.createDataFrame([], replica_struct(boot)), created["boot"])

    on_spark = {fed.layout.replica_path(DB, "rs_spark")}
    real_writable = delta_rs_writer.writable
    monkeypatch.setattr(table_merge, "writable",
                        lambda replica, target, **kw:
                        replica.table_uri.removeprefix("file://").rstrip("/") not in on_spark
                        and real_writable(replica, target, **kw))

    with fed.txn() as t:
        for table in KINDS:
            for key in (1, 2, 3):
                t.put(DB, table, _row(fed, table, key, rng, with_added=False))
    fed.resolve()
    first = run_merge(spark, fed.layout, write_log=False, history_config=HISTORY)
    assert {r.table: r.status for r in first.tables} == {f"{DB}.{t}": MergeStatus.MERGED for t in KINDS}

    for table in KINDS:
        fed.ddl(fed.up.add_columns(DB, table, _added_specs(table, random.Random(table))))
    with fed.txn() as t:
        for table in KINDS:
            t.put(DB, table, _row(fed, table, 2, rng, with_added=True))  # a row the replica holds
            t.put(DB, table, _row(fed, table, 4, rng, with_added=True))  # a new one
            t.delete(DB, table, {"id": 3})
    upper = fed.resolve()
    second = run_merge(spark, fed.layout, write_log=False, history_config=HISTORY)
    results = {r.table: r for r in second.tables}
    assert {t: r.status for t, r in results.items()} == {f"{DB}.{t}": MergeStatus.MERGED for t in KINDS}, \
        {t: r.reason for t, r in results.items()}

    catalog = ReplicaCatalog(fed.layout)
    for table, how in KINDS.items():
        path = catalog.get(results[f"{DB}.{table}"].table_key).path
        rows = _utc(replica_rows(spark, path), read_replica_struct(path))
        if table == "hist":
            rows = [r for r in rows if not r.pop("_tidb_deleted")]
        expected = fed.expected_rows(DB, table, upper)
        assert rows == expected, (how, _differences(rows, expected))
        engine = DeltaTable(path).history(1)[0]["engineInfo"]
        assert by_driver(DeltaTable(path).history(1)[0]) == (table in ON_DRIVER), (how, engine)
        assert "timestampNtz" in (DeltaTable(path).protocol().reader_features or ()), how
        version = DeltaTable(path).version()
        duck = duckdb_read(fed.layout, f"{DB}.{table}", version)
        if table == "mapped":  # deltalake refuses column mapping: DuckDB is checked against Spark
            assert_same_rows(duck, _utc(replica_rows(spark, path), read_replica_struct(path)), how)
        else:
            assert_duckdb_reads_as_deltalake(duck, path, version, how)
    hist = history_path(fed.layout, catalog.get(results[f"{DB}.hist"].table_key).path)
    assert_duckdb_reads_as_deltalake(duckdb_read_path(hist, DeltaTable(hist).version()), hist,
                                     DeltaTable(hist).version(), "history table")
    assert {name for name, _ in _added("hist")} <= {f.name for f in read_replica_struct(hist).fields}
    fed.close()


def _utc(rows: list[dict], struct: StructType) -> list[dict]:
    """TIMESTAMP values as the aware UTC instants the upstream replay gives: Spark hands them out
    naive, in the local time zone."""
    instants = [f.name for f in struct.fields if isinstance(f.dataType, TimestampType)]
    for row in rows:
        for name in instants:
            if row[name] is not None:
                row[name] = row[name].astimezone(timezone.utc)
    return rows


def _differences(rows: list[dict], expected: list[dict]) -> list:
    """(id, column, replica value, upstream value) of each value that differs."""
    by_id = {r["id"]: r for r in expected}
    return [(row["id"], name, value, by_id.get(row["id"], {}).get(name))
            for row in rows for name, value in row.items() if by_id.get(row["id"], {}).get(name) != value]
