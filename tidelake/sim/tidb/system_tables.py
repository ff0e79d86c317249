"""The `mysql` schema pieces a replicator meets: the DDL job, reorg and history tables.

Their TableInfos are built from TiDB's own CREATE TABLE statements (pkg/meta/metadef
`JobTableSQL`/`ReorgTableSQL`/`HistoryTableSQL`) with the reserved ids of
docs/metadata.md#reserved-ids, so a schema snapshot at any ts sees TiDB's shape and the DDL
puller finds `job_meta` by name (docs/wire.md#tidb_ddl_job-row).
"""

from __future__ import annotations

from tidelake.codec.keys import MAX_INT48
from tidelake.codec.schema import DBInfo, IndexColumn, IndexInfo, TableInfo
from tidelake.sim.tidb.types import build_column, column_def

MYSQL_DB_NAME = "mysql"
# Classic TiDB gives `mysql` an ordinary generated id, the first one (docs/metadata.md#reserved-ids).
MYSQL_DB_ID = 1
DDL_JOB_TABLE_ID = MAX_INT48 - 1  # docs/wire.md#table-id
DDL_REORG_TABLE_ID = MAX_INT48 - 2
DDL_HISTORY_TABLE_ID = MAX_INT48 - 3
# DDLTableVersion 1: tidb_ddl_job/reorg/history exist (docs/metadata.md#meta-keys-and-values).
DDL_TABLE_VERSION = 1
# Ids TiDB's bootstrap spends on the mysql schema's ordinary tables; user objects start above.
FIRST_USER_ID = 100

# docs/wire.md#tidb_ddl_job-row: job_id=1, reorg=2, schema_ids=3, table_ids=4, job_meta=5, type=6, processing=7
_JOB_COLUMNS = (
    ("job_id", "bigint", "not null", "pk"),
    ("reorg", "int"),
    ("schema_ids", "text"),
    ("table_ids", "text"),
    ("job_meta", "longblob"),
    ("type", "int"),
    ("processing", "int"),
)
_REORG_COLUMNS = (
    ("job_id", "bigint", "not null"),
    ("ele_id", "bigint"),
    ("ele_type", "blob"),
    ("start_key", "blob"),
    ("end_key", "blob"),
    ("physical_id", "bigint"),
    ("reorg_meta", "longblob"),
)
_HISTORY_COLUMNS = (
    ("job_id", "bigint", "not null", "pk"),
    ("job_meta", "longblob"),
    ("db_name", "char(64)"),
    ("table_name", "char(64)"),
    ("schema_ids", "text"),
    ("table_ids", "text"),
    ("create_time", "datetime"),
)


def _table(table_id: int, name: str, specs: tuple) -> TableInfo:
    columns = [build_column(column_def(spec), i + 1, i) for i, spec in enumerate(specs)]
    info = TableInfo(id=table_id, name=name, columns=columns, max_col_id=len(columns))
    info.pk_is_handle = any(column_def(spec).primary_key for spec in specs)
    return info


def mysql_db() -> DBInfo:
    return DBInfo(id=MYSQL_DB_ID, name=MYSQL_DB_NAME)


def ddl_job_table() -> TableInfo:
    return _table(DDL_JOB_TABLE_ID, "tidb_ddl_job", _JOB_COLUMNS)


def ddl_history_table() -> TableInfo:
    return _table(DDL_HISTORY_TABLE_ID, "tidb_ddl_history", _HISTORY_COLUMNS)


def ddl_reorg_table() -> TableInfo:
    info = _table(DDL_REORG_TABLE_ID, "tidb_ddl_reorg", _REORG_COLUMNS)
    # unique key(job_id, ele_id, ele_type(20))
    info.indices = [IndexInfo(id=1, name="job_id", unique=True, columns=[
        IndexColumn("job_id", 0), IndexColumn("ele_id", 1), IndexColumn("ele_type", 2, 20)])]
    info.max_idx_id = 1
    return info


def system_tables() -> list[TableInfo]:
    return [ddl_job_table(), ddl_reorg_table(), ddl_history_table()]
