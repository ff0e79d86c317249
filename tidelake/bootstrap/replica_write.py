"""Write a bootstrapped replica: all its rows and checkpoint T in ONE Delta commit.

Delta cannot create a table with column mapping and change data feed in the same commit as a
DataFrame write (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION, delta-spark 4.4), so the table
is first created empty, WITHOUT a checkpoint, and the rows follow in one overwrite that carries
the txn (app id MERGE_APP_ID, version T; facts/stack.md §11). A table without a checkpoint is
not a replica yet to anyone (merge, verify), so a crash between the two commits, or during the
data write (files written but never committed), leaves nothing that claims to be complete; the
rerun's overwrite replaces whatever the table holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelake.bootstrap.replica_rows import COMMIT_TS_COLUMN, replica_columns, has_rowid
from tidelake.codec.row import EXTRA_HANDLE_NAME
from tidelake.codec.schema import TableInfo
from tidelake.codec.spark_types import spark_type
from tidelake.errors import TidelakeError
from tidelake.lake.checkpoint import read_checkpoint, writer_txn_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

REPLICA_PROPERTIES = {
    "delta.columnMapping.mode": "name",
    "delta.enableTypeWidening": "true",
    "delta.enableChangeDataFeed": "true",
    "delta.enableDeletionVectors": "true",
}


class ReplicaWriteError(TidelakeError):
    """The data commit did not record the expected checkpoint (someone else owns the replica)."""


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def replica_ddl(info: TableInfo) -> str:
    """Spark column list of the replica (upstream names, mapped types, tidelake columns)."""
    columns = [f"{_quote(c.name)} {spark_type(c.field_type)}" for c in replica_columns(info)]
    if has_rowid(info):
        columns.append(f"{EXTRA_HANDLE_NAME} BIGINT NOT NULL")
    columns.append(f"{COMMIT_TS_COLUMN} BIGINT NOT NULL")
    return ", ".join(columns)


def write_replica(spark: SparkSession, path: str, info: TableInfo, rows: DataFrame, ts: int,
                  storage_options: dict[str, str] | None = None) -> None:
    """Make `path` hold exactly `rows` with checkpoint `ts`, atomically."""
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in REPLICA_PROPERTIES.items())
    location = path.replace("`", "``")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS delta.`{location}` ({replica_ddl(info)}) USING delta "
        f"TBLPROPERTIES ({properties})"
    )
    writer = rows.write.format("delta").mode("overwrite")
    for key, value in writer_txn_options(ts).items():
        writer = writer.option(key, value)
    writer.save(path)
    recorded = read_checkpoint(path, storage_options)
    if recorded != ts:
        raise ReplicaWriteError(
            f"{path}: the bootstrap write at ts {ts} was skipped by Delta because the replica already "
            f"records checkpoint {recorded}; it is maintained by merge already (drop it to re-bootstrap)"
        )
