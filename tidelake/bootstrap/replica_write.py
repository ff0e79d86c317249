"""Write a bootstrapped replica: all its rows and checkpoint T in ONE Delta commit. The table is
created empty and without a checkpoint first, so a crash anywhere leaves nothing that claims to
be complete, and the rerun's overwrite replaces whatever is there. Owner: bootstrap.

More: docs/internals.md#replica_write.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delta.tables import DeltaTable

from tidelake.bootstrap.replica_rows import replica_ddl
from tidelake.codec.schema import TableInfo
from tidelake.errors import TidelakeError
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.merge.replica_schema import creation_properties, replica_struct, spark_sql_string
from tidelake.merge.txn_confs import writer_txn_options

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class ReplicaWriteError(TidelakeError):
    """The replica's commit did not record the bootstrap's checkpoint."""


def write_replica(spark: SparkSession, path: str, info: TableInfo, rows: DataFrame, ts: int,
                  storage_options: dict[str, str] | None = None) -> None:
    """Make `path` hold exactly `rows` with checkpoint `ts`."""
    properties = ", ".join(f"{spark_sql_string(k)} = {spark_sql_string(v)}" for k, v in creation_properties(info).items())
    location = path.replace("`", "``")
    _drop_stale_attempt(spark, path, info, storage_options)
    spark.sql(f"CREATE TABLE IF NOT EXISTS delta.`{location}` ({replica_ddl(info)}) USING delta "
              f"TBLPROPERTIES ({properties})")
    writer = rows.write.format("delta").mode("overwrite")
    for key, value in writer_txn_options(ts).items():
        writer = writer.option(key, value)
    writer.save(path)
    recorded = read_checkpoint(path, storage_options)
    if recorded != ts:
        raise ReplicaWriteError(f"{path}: replica records checkpoint {recorded}, not the bootstrap's {ts}: "
                                "merge maintains it already (drop it to bootstrap it again)")


def _drop_stale_attempt(spark: SparkSession, path: str, info: TableInfo, storage_options: dict[str, str] | None) -> None:
    """A rerun after a crash may meet the table a failed attempt created for an older schema of
    the upstream table (a DDL came in between). Delta will not change it in place (column mapping
    with CDF blocks a schema-changing overwrite, and a path table a schema-changing REPLACE), and
    without a checkpoint it is no replica yet: it is ours to delete."""
    if read_checkpoint(path, storage_options) is not None or not DeltaTable.isDeltaTable(spark, path):
        return
    existing = [(f.name, f.dataType) for f in spark.read.format("delta").load(path).schema.fields]
    if existing == [(f.name, f.dataType) for f in replica_struct(info).fields]:
        return
    jvm = spark.sparkContext._jvm
    folder = jvm.org.apache.hadoop.fs.Path(path)
    folder.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(folder, True)
    jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()

