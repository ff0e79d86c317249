"""The rows a DDL job leaves in `mysql.tidb_ddl_job` and `mysql.tidb_ddl_history`.

TiDB inserts the job with `insert into mysql.tidb_ddl_job(job_id, reorg, schema_ids, table_ids,
job_meta, type, processing)`, rewrites `job_meta` at every step, then on finish deletes the row and
inserts the job (state synced) into `tidb_ddl_history` (pkg/ddl `insertDDLJobs2Table`,
`updateDDLJob`, `finishDDLJob`). Row keys and values are those of docs/wire.md#tidb_ddl_job-row.
"""

from __future__ import annotations

from datetime import datetime

from tidelake.codec.ddl_job import ActionType, DDLJob
from tidelake.codec.keys import record_key
from tidelake.codec.row import encode_row
from tidelake.sim.tidb import system_tables as st
from tidelake.tso import to_datetime

_JOB_TABLE = st.ddl_job_table()
_HISTORY_TABLE = st.ddl_history_table()
# `Job.MayNeedReorg` for the jobs simulated here (MODIFY COLUMN never reorganises in the simulator).
_REORG_ACTIONS = frozenset({ActionType.ADD_INDEX, ActionType.ADD_PRIMARY_KEY, ActionType.REORGANIZE_PARTITION})


def schema_ids_text(job: DDLJob, old_schema_id: int = 0) -> str:
    """`job2SchemaIDs`: a rename across databases involves both schemas."""
    ids = [job.schema_id] if not old_schema_id or old_schema_id == job.schema_id else [old_schema_id, job.schema_id]
    return ",".join(str(i) for i in ids)


def table_ids_text(job: DDLJob, new_table_id: int = 0) -> str:
    """`job2TableIDs`: a truncate involves the old and the new table id."""
    ids = [job.table_id] + ([new_table_id] if new_table_id else [])
    return ",".join(str(i) for i in ids)


def job_row_key(job_id: int) -> bytes:
    """`t{281474976710654}_r{job_id}`: job_id is the int handle (docs/wire.md#tidb_ddl_job-row)."""
    return record_key(st.DDL_JOB_TABLE_ID, job_id)


def job_row_value(job: DDLJob, schema_ids: str, table_ids: str, processing: bool) -> bytes:
    return encode_row(_JOB_TABLE, {
        "job_id": job.id,
        "reorg": int(job.type in _REORG_ACTIONS),
        "schema_ids": schema_ids,
        "table_ids": table_ids,
        "job_meta": job.to_json_bytes(),
        "type": int(job.type),
        "processing": int(processing),
    })


def history_row_key(job_id: int) -> bytes:
    return record_key(st.DDL_HISTORY_TABLE_ID, job_id)


def history_row_value(job: DDLJob, db_name: str, table_name: str, schema_ids: str, table_ids: str) -> bytes:
    created: datetime = to_datetime(job.start_ts).replace(tzinfo=None, microsecond=0)
    return encode_row(_HISTORY_TABLE, {
        "job_id": job.id,
        "job_meta": job.to_json_bytes(),
        "db_name": db_name,
        "table_name": table_name,
        "schema_ids": schema_ids,
        "table_ids": table_ids,
        "create_time": created,
    })
