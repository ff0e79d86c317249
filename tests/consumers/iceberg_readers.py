"""Iceberg readers of a published replica checked against a Delta reader of the same version:
pyiceberg (at the syncpoint's tag) and DuckDB's iceberg extension (at that tag's snapshot)
against DuckDB's delta extension (delta-kernel-rs; the publisher lists files with delta-rs),
every column of every row; tests/consumers/test_iceberg_*.py."""

from __future__ import annotations

import duckdb
import duckdb_extension_avro
import duckdb_extension_iceberg
import pyarrow as pa
from consumers.delta_readers import assert_same_rows
from pyiceberg.catalog import Catalog

from tidelake.consumers.duckdb_lake import extension_file, offline_connection
from tidelake.consumers.iceberg.publish import syncpoint_tag
from tidelake.lake.layout import LakeLayout
from tidelake.syncpoint.records import Syncpoint


def iceberg_duckdb(layout: LakeLayout | None = None) -> duckdb.DuckDBPyConnection:
    """DuckDB with the iceberg extension (and the avro one it reads manifests with) loaded from
    their packages, nothing downloaded; with the S3 secret of `layout` if it is an object-store lake."""
    con = offline_connection(layout)
    for package, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
        con.execute(f"LOAD '{extension_file(package, name)}'")
    return con


def delta_rows(con: duckdb.DuckDBPyConnection, path: str, version: int) -> pa.Table:
    return con.sql(f"SELECT * FROM delta_scan('{path}', version => {version})").to_arrow_table()


def assert_iceberg_reads_the_cut(catalog: Catalog, syncpoint: Syncpoint, layout: LakeLayout | None = None) -> None:
    """Every replica of the cut, read through its Iceberg table at the cut's tag by pyiceberg and by
    DuckDB, has the columns (names, order) and rows of its Delta version."""
    con = iceberg_duckdb(layout)
    for replica in syncpoint.replicas:
        why = f"{replica.qualified_name} at {syncpoint.ts}"
        expected = delta_rows(con, replica.path, replica.version)
        table = catalog.load_table((replica.db, replica.name))
        snapshot_id = table.refs()[syncpoint_tag(syncpoint.ts)].snapshot_id
        # to_arrow() cannot concatenate files delta-rs wrote (Arrow string_view in their schema) with
        # others; the batch reader casts every batch to the table's schema
        by_pyiceberg = table.scan(snapshot_id=snapshot_id).to_arrow_batch_reader().read_all()
        by_duckdb = con.sql(f"SELECT * FROM iceberg_scan('{table.metadata_location}', "
                            f"snapshot_from_id => {snapshot_id})").to_arrow_table()
        for reader, got in (("pyiceberg", by_pyiceberg), ("duckdb", by_duckdb)):
            assert got.schema.names == expected.schema.names, (why, reader, got.schema.names, expected.schema.names)
            assert_same_rows(got, expected.to_pylist(), f"{why} by {reader}")
