"""The DDL jobs still running at a restart's ts, and their tables as the finished jobs left them.

TiDB writes a job's meta step by step and the job is done only with its last step, so the schema
snapshot at a restart's ts D can already show a job finished only at T > D (a DROP PARTITION has
taken the partition out, a RENAME TABLE has renamed). The tables each running job involves (the
job row's `table_ids`, pingcap/tidb pkg/ddl `job2TableIDs`) are taken as the lake's DDL history has
them at D instead: what the puller fed before the restart, so the job pulled again at T leaves and
joins the same ids. Owner: the puller runner's restart.

More: docs/internals.md#running_jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.capture.changefeed.ddl_puller import JobRowDecoder
from tidelake.capture.puller_errors import PullerError
from tidelake.codec.ddl_job import DDLJob
from tidelake.codec.keys import DDL_JOB_TABLE_ID
from tidelake.codec.schema import TableInfo
from tidelake.errors import InputError
from tidelake.lake.schema_history import SchemaHistory
from tidelake.upstream.kv_snapshot import SnapshotReader


@dataclass(frozen=True)
class RunningJob:
    """A job whose row at the ts is not done, with the table ids it involves."""

    job: DDLJob
    table_ids: frozenset[int]


def running_jobs(reader: SnapshotReader, decoder: JobRowDecoder, ts: int) -> list[RunningJob]:
    """The jobs of `mysql.tidb_ddl_job` at `ts` that have run a step and are not done, in job id
    order: `real_start_ts` is set by the first step (pingcap/tidb pkg/ddl job_worker.go
    `runOneJobStep`); a job that never started changed no meta, a done one is in the snapshot."""
    found = []
    for key, value in reader.scan_table(DDL_JOB_TABLE_ID, ts):
        try:
            job = DDLJob.from_json(decoder.job_meta(value))
            table_ids = decoder.table_ids(value)
        except InputError as exc:
            raise PullerError(f"DDL job row {key.hex()} at ts {ts}: {exc}") from exc
        if job.is_done() or not job.real_start_ts:
            continue
        found.append(RunningJob(job, frozenset(table_ids | ({job.table_id} if job.table_id else set()))))
    return sorted(found, key=lambda r: r.job.id)


def running_table_ids(reader: SnapshotReader, decoder: JobRowDecoder, ts: int) -> frozenset[int]:
    """The ids of the tables the jobs running at `ts` involve (SchemaTracker's RunningTables)."""
    return frozenset(tid for job in running_jobs(reader, decoder, ts) for tid in job.table_ids)


def tables_before(jobs: list[RunningJob], history: SchemaHistory) -> dict[int, tuple[int, TableInfo]]:
    """Table id -> (db id, info) as the history has it, for the jobs' tables it holds: what
    SchemaTracker.restore takes. A table it does not hold was not replicated before the job and
    stays as the snapshot shows it: selected now, it joins by request as any table new to the
    feed does (tidelake.capture.changefeed.filter_change), and its bootstrap reads its rows."""
    found = {table_id: history.live_table(table_id) for job in jobs for table_id in sorted(job.table_ids)}
    return {table_id: was for table_id, was in found.items() if was is not None}
