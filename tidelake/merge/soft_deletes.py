"""Soft deletes: a replica whose deleted rows stay, flagged `_tidb_deleted = true` with their last
values, instead of being removed (docs/history.md).

A replica has soft deletes exactly when it has the column (tidelake.merge.replica_schema
DELETED_COLUMN), so every merge keeps them, however it is started. The changefeed config's
[history].soft_deletes turns them on: the column is added (a plain ADD COLUMNS, no reader
feature), existing rows are set to false, and only then is SOFT_DELETES_PROPERTY set, so a crash in
between is finished by the next run. Readers treat NULL as false all the same.

What changes in the merge (tidelake.merge.window_spec): a delete UPDATEs the row (flag, and
`_tidb_commit_ts` = the delete's ts) instead of deleting it, a put clears the flag, and a window
of new keys is never appended: "no old value, so the replica holds no row for the key" is false
here, since the replica keeps deleted keys (docs/design.md "Appends"). TRUNCATE TABLE and
DROP/TRUNCATE PARTITION flag their rows the same way (tidelake.merge.ddl_apply).
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
