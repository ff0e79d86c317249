"""The Delta schema of a replica, derived from the upstream TableInfo (docs/design.md#lake-layout):
the stored columns as upstream names them, typed by tidelake.codec.spark_types, all nullable,
then the hidden columns (`_tidb_commit_ts`, `_tidb_rowid`, `_tidb_partition_id`,
`_tidb_deleted`). A new replica gets change data feed and column mapping only when a name needs
it, so every Delta reader can read it. Owner: the merge (ddl_apply) and bootstrap.

More: docs/internals.md#replica_schema.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from deltalake import DeltaTable, Schema

from tidelake.codec.schema import ColumnInfo, TableInfo
from tidelake.codec.spark_types import spark_type
from tidelake.errors import InputError
from tidelake.lake.checkpoint import MERGE_APP_ID, open_replica
from tidelake.lake.column_mapping import COLUMN_MAPPING_MODE, NAME_MODE
from tidelake.merge.decimal_stats import STATS_COLUMNS, stats_columns, wide_decimals
from tidelake.merge.txn_confs import delta_rs_commit_properties, writer_txn_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

COMMIT_TS_COLUMN = "_tidb_commit_ts"
ROWID_COLUMN = "_tidb_rowid"
PARTITION_ID_COLUMN = "_tidb_partition_id"
DELETED_COLUMN = "_tidb_deleted"
HIDDEN_COLUMNS = (COMMIT_TS_COLUMN, ROWID_COLUMN, PARTITION_ID_COLUMN, DELETED_COLUMN)

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
REPLICA_PROPERTIES: dict[str, str] = {CHANGE_DATA_FEED: "true"}
COLUMN_MAPPING: dict[str, str] = {COLUMN_MAPPING_MODE: NAME_MODE}  # reader feature columnMapping
TYPE_WIDENING: dict[str, str] = {"delta.enableTypeWidening": "true"}  # reader feature typeWidening
# Delta refuses these in a column name unless column mapping is on (delta-io/delta
# SchemaUtils.checkFieldNames / DeltaErrors.invalidColumnName); TiDB allows them.
_PARQUET_UNSAFE_NAME = re.compile(r"[ ,;{}()\n\t=]")


def stored_columns(info: TableInfo) -> list[ColumnInfo]:
    """Public columns whose values TiKV stores (virtual generated columns are computed on read)."""
    return [c for c in info.public_columns() if not (c.is_generated and not c.generated_stored)]


def has_rowid(info: TableInfo) -> bool:
    """No integer PK handle and no clustered common handle: rows are keyed by _tidb_rowid."""
    return not info.pk_is_handle and not info.is_common_handle


def is_partitioned(info: TableInfo) -> bool:
    return info.partition is not None and info.partition.enable and bool(info.partition.definitions)


def key_columns(info: TableInfo) -> list[str]:
    """Replica columns identifying a row: [_tidb_partition_id] + the handle (PK columns or _tidb_rowid)."""
    if info.pk_is_handle:
        handle = info.handle_column()
        if handle is None:
            raise InputError(f"table {info.name!r}: pk_is_handle but no PRIMARY KEY column flag")
        keys = [handle.name]
    elif info.is_common_handle:
        primary = info.primary_index()
        if primary is None:
            raise InputError(f"table {info.name!r}: clustered index but no PRIMARY index")
        keys = [c.name for c in primary.columns]
    else:
        keys = [ROWID_COLUMN]
    return ([PARTITION_ID_COLUMN] if is_partitioned(info) else []) + keys


def replica_columns(info: TableInfo) -> list[tuple[str, str, str]]:
    """(name, Spark SQL type, comment) of every replica column, hidden ones last."""
    cols = [(c.name, spark_type(c.field_type), c.comment) for c in stored_columns(info)]
    clash = {n.lower() for n, _, _ in cols} & set(HIDDEN_COLUMNS)
    if clash:
        raise InputError(f"table {info.name!r}: column {sorted(clash)[0]} clashes with a tidelake hidden column")
    cols.append((COMMIT_TS_COLUMN, "BIGINT", "commit ts of the row's last change"))
    if has_rowid(info):
        cols.append((ROWID_COLUMN, "BIGINT", "TiDB row handle (table without PRIMARY KEY handle)"))
    if is_partitioned(info):
        cols.append((PARTITION_ID_COLUMN, "BIGINT", "physical table id of the row's partition"))
    return cols


def creation_properties(info: TableInfo) -> dict[str, str]:
    """The table properties a new replica of `info` starts with: column mapping only if a column
    name needs it, statistics only of the columns delta-rs writes them right for (tidelake.merge.decimal_stats)."""
    names = [name for name, _, _ in replica_columns(info)]
    needs_mapping = any(_PARQUET_UNSAFE_NAME.search(n) for n in names)
    stats = stats_columns(replica_struct(info), key_columns(info))
    return {**REPLICA_PROPERTIES, **(COLUMN_MAPPING if needs_mapping else {}),
            **({STATS_COLUMNS: stats} if stats is not None else {})}


def enable_properties(spark: SparkSession, path: str, wanted: dict[str, str],
                      storage_options: dict[str, str] | None = None) -> None:
    """Set `wanted` table properties the replica does not have yet (benches and tests give replicas
    the features replicas of older releases have). Setting delta.columnMapping.mode or
    delta.enableTypeWidening upgrades the protocol to the feature in the same commit (docs/stack.md#delta-lake-schema-changes-protocol-concurrency); a replica that has them already is left alone."""
    current = DeltaTable(path, storage_options=storage_options).metadata().configuration
    missing = {k: v for k, v in wanted.items() if current.get(k) != v}
    if missing:
        pairs = ", ".join(f"{spark_sql_string(k)} = {spark_sql_string(v)}" for k, v in missing.items())
        spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({pairs})")


def exclude_wide_decimals(spark: SparkSession, path: str, info: TableInfo,
                          storage_options: dict[str, str] | None = None) -> bool:
    """Keep the statistics property of a replica of `info` with wide decimals, or of its history
    table (the columns of the table at `path`, keyed by `info`'s key columns), as
    tidelake.merge.decimal_stats.stats_columns says: set on tables made before it, and again
    after a DDL changed the columns (a metadata commit); False when there was nothing to do."""
    from pyspark.sql.types import StructType  # see data_type

    if not wide_decimals(replica_struct(info)):  # most replicas: their log is not opened per run
        return False
    replica = DeltaTable(path, storage_options=storage_options)
    struct = StructType.fromJson(json.loads(replica.schema().to_json()))
    wanted = stats_columns(struct, key_columns(info))
    if wanted is None or replica.metadata().configuration.get(STATS_COLUMNS) == wanted:
        return False
    enable_properties(spark, path, {STATS_COLUMNS: wanted}, storage_options)
    return True


def schema_features(struct: StructType) -> set[str]:
    """The Delta table features a table of schema `struct` needs: timestampNtz for a TIMESTAMP_NTZ
    column (DATETIME upstream)."""
    from pyspark.sql.types import ArrayType, TimestampNTZType  # see data_type

    def holds_ntz(tp: DataType) -> bool:
        return isinstance(tp, TimestampNTZType) or (isinstance(tp, ArrayType) and holds_ntz(tp.elementType))

    return {"timestampNtz"} if any(holds_ntz(f.dataType) for f in struct.fields) else set()


def enable_schema_features(spark: SparkSession, path: str, struct: StructType,
                           storage_options: dict[str, str] | None = None) -> None:
    """Turn on the table features `struct` needs that the table at `path` lacks, before a DDL brings
    such a column in: Delta turns them on by itself only when it creates a table, and refuses an
    ALTER or a schema-changing overwrite without them (DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT).
    Every reader of docs/operations.md#who-can-read-a-replica reads timestampNtz. Owner:
    tidelake.merge.ddl_apply."""
    protocol = DeltaTable(path, storage_options=storage_options).protocol()
    missing = schema_features(struct) - set(protocol.reader_features or ())
    if missing:
        pairs = ", ".join(f"'delta.feature.{name}' = 'supported'" for name in sorted(missing))
        spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({pairs})")


def quote(name: str) -> str:
    """Spark SQL identifier quoting."""
    return "`" + name.replace("`", "``") + "`"


def spark_sql_string(text: str) -> str:
    """A Spark SQL string literal of `text` (backslash escapes; delta-rs predicates take
    tidelake.lake.delta_read.sql_string)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def data_type(ddl: str) -> DataType:
    """Spark DataType of a type string of the mapping table (parsed here: no JVM needed)."""
    from pyspark.sql import types as T  # not at the top: the Airflow plan and status import this module without Spark

    simple = {
        "TINYINT": T.ByteType(), "SMALLINT": T.ShortType(), "INT": T.IntegerType(), "BIGINT": T.LongType(),
        "FLOAT": T.FloatType(), "DOUBLE": T.DoubleType(), "STRING": T.StringType(), "BINARY": T.BinaryType(),
        "DATE": T.DateType(), "TIMESTAMP": T.TimestampType(), "TIMESTAMP_NTZ": T.TimestampNTZType(),
        "BOOLEAN": T.BooleanType(),
    }
    text = ddl.strip().upper()
    if text in simple:
        return simple[text]
    decimal = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", text)
    if decimal:
        return T.DecimalType(int(decimal.group(1)), int(decimal.group(2)))
    array = re.fullmatch(r"ARRAY<(.+)>", text)
    if array:
        return T.ArrayType(data_type(array.group(1)), True)
    raise InputError(f"Spark type {ddl!r} is not one the replica type mapping produces")


def replica_struct(info: TableInfo) -> StructType:
    from pyspark.sql.types import StructField, StructType  # see data_type

    return StructType(
        [
            StructField(name, data_type(tp), True, {"comment": comment} if comment else {})
            for name, tp, comment in replica_columns(info)
        ]
    )


def read_replica_struct(path: str, storage_options: dict[str, str] | None = None) -> StructType:
    """The replica's current Spark schema, read from its Delta log without a Spark job."""
    return delta_struct(DeltaTable(path, storage_options=storage_options))


def delta_struct(table: DeltaTable) -> StructType:
    """The Spark schema of an opened Delta table's current version."""
    from pyspark.sql.types import StructType  # see data_type

    return StructType.fromJson(json.loads(table.schema().to_json()))


def create_replica(
    spark: SparkSession,
    path: str,
    info: TableInfo,
    checkpoint_ts: int,
    storage_options: dict[str, str] | None = None,
) -> bool:
    """Create the EMPTY replica at `path` as of `checkpoint_ts`, properties and txn in ONE commit.

    Empty only: delta-spark 4.4 refuses a creating write WITH rows on a table with column mapping
    and CDF (DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION; tidelake.bootstrap.replica_write).
    Idempotent: returns False when the replica already records a checkpoint >= `checkpoint_ts`.
    """
    replica = open_replica(path, storage_options)
    current = None if replica is None else replica.transaction_version(MERGE_APP_ID)
    if current is not None and current >= checkpoint_ts:
        return False
    properties = creation_properties(info)
    if replica is None and COLUMN_MAPPING.keys().isdisjoint(properties):
        # No Spark job: delta-rs writes the same first commit (schema, properties, txn) in a
        # fraction of what Spark's empty write costs.
        DeltaTable.create(path, Schema.from_json(replica_struct(info).json()), mode="error",
                          configuration=properties, storage_options=storage_options,
                          commit_properties=delta_rs_commit_properties(checkpoint_ts))
        return True
    writer = spark.createDataFrame([], replica_struct(info)).write.format("delta").mode("append")
    for key, value in {**properties, **writer_txn_options(checkpoint_ts)}.items():
        writer = writer.option(key, value)
    writer.save(path)
    return True
