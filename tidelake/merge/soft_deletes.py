"""Soft deletes: a replica whose deleted rows stay, flagged `_tidb_deleted = true` with their
last values (docs/history.md). A replica has them exactly when it has the column, so every merge
keeps them however it is started; the clauses are tidelake.merge.window_spec's. Owner: TableMerge
turns them on for the tables the changefeed's [history] selects.

More: docs/internals.md#soft_deletes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltalake import DeltaTable

from tidelake.lake.history_table import SOFT_DELETES_PROPERTY
from tidelake.merge.replica_schema import DELETED_COLUMN, quote, read_replica_struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType


def has_soft_deletes(replica: StructType) -> bool:
    """Whether a replica of this schema keeps deleted rows."""
    return DELETED_COLUMN in replica.fieldNames()


def enable_soft_deletes(spark: SparkSession, path: str, storage_options: dict[str, str] | None = None) -> bool:
    """Give the replica at `path` soft deletes; False when it had them already."""
    if DeltaTable(path, storage_options=storage_options).metadata().configuration.get(SOFT_DELETES_PROPERTY) == "true":
        return False
    target = f"delta.{quote(path)}"
    if not has_soft_deletes(read_replica_struct(path, storage_options)):
        spark.sql(f"ALTER TABLE {target} ADD COLUMNS ({quote(DELETED_COLUMN)} BOOLEAN "
                  "COMMENT 'deleted upstream; the row keeps its last values')")
    spark.sql(f"UPDATE {target} SET {quote(DELETED_COLUMN)} = false WHERE {quote(DELETED_COLUMN)} IS NULL").collect()
    spark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('{SOFT_DELETES_PROPERTY}' = 'true')")
    return True


def live_condition(alias: str = "") -> str:
    """SQL: the row is not soft-deleted (NULL counts as live)."""
    prefix = f"{alias}." if alias else ""
    return f"NOT coalesce({prefix}{quote(DELETED_COLUMN)}, false)"
