"""DdlPuller: done jobs from tidb_ddl_job rows, once each, in finished-ts order (docs/wire.md#ddl-job-storage-as-ticdc-reads-it)."""

from __future__ import annotations

import json

import pytest

from tests.capture.pull_harness import sim  # noqa: F401 (fixture)
from tests.capture.tidb_writes import db_json, job_row, table_json
from tidelake.capture.changefeed.ddl_puller import DdlPuller, Fence, JobRowDecoder
from tidelake.capture.puller_errors import PullerError
from tidelake.codec import meta_keys
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.keys import DDL_JOB_TABLE_ID, record_key
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.lake.ddl_log import snapshot_rows
from tidelake.lake.layout import DdlSource
from tidelake.lake.row_change import RowChange
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import SchemaSnapshot
from tidelake.upstream.schema_tracker import SchemaTracker

SHOP = 2
START = 1000


def tracker() -> SchemaTracker:
    snap = SchemaSnapshot(START, 3, [DBInfo.from_json(db_json(SHOP, "shop"))],
                          {SHOP: [TableInfo.from_json(table_json(110, "orders"))]})
    return SchemaTracker(snap, TableFilter.parse(["shop.*"]), lambda ts: snap)


def create_job(job_id: int, table_id: int, state: JobState = JobState.DONE, version: int = 4) -> DDLJob:
    table = table_json(table_id, f"t{table_id}")
    return DDLJob(id=job_id, type=ActionType.CREATE_TABLE, schema_id=SHOP, table_id=table_id, schema_name="shop",
                  table_name=f"t{table_id}", state=state, schema_version=version, query=f"CREATE TABLE t{table_id}",
                  db_info=DBInfo.from_json(db_json(SHOP, "shop")), table_info=TableInfo.from_json(table))


def row(job: DDLJob, commit_ts: int, op: str = "put", column_id: int = 5) -> RowChange:
    value = job_row(job, column_id) if op == "put" else b""
    key = record_key(DDL_JOB_TABLE_ID, job.id)
    return RowChange(DDL_JOB_TABLE_ID, commit_ts, commit_ts - 1, op, key, value, b"", 1)


@pytest.fixture
def puller() -> DdlPuller:
    return DdlPuller(JobRowDecoder(None), tracker(), START)


def test_only_done_puts_once_each_in_finished_order(puller):
    a, b = create_job(7, 111), create_job(8, 112)
    puller.on_rows([row(create_job(7, 111, JobState.RUNNING), 1100)])  # an earlier step of job 7
    puller.on_rows([row(b, 1300), row(a, 1200)])  # two regions / a scan: no global order
    puller.on_rows([row(a, 1200), row(a, 1250, op="delete")])  # re-delivered, then synced
    assert puller.on_resolved(1150) == []
    released = puller.on_resolved(1400)
    assert [(p.job.id, p.finished_ts) for p in released] == [(7, 1200), (8, 1300)]
    assert [sorted(p.effect.joined) for p in released] == [[111], [112]]
    assert released[0].job.finished_ts == 1200 and released[0].job.start_ts == 1199  # TiCDC's overrides
    rows = released[0].rows
    assert [(r.job_id, r.commit_ts, r.table_id, r.table_name, r.schema_name, r.source) for r in rows] == [
        (7, 1200, 111, "t111", "shop", DdlSource.JOB)]
    assert json.loads(rows[0].table_info)["id"] == 111 and rows[0].query == "CREATE TABLE t111"
    puller.on_rows([row(a, 1200)])  # a late duplicate below the resolved ts
    assert puller.on_resolved(1500) == [] and puller.resolved_ts == 1500


def test_skips_jobs_at_or_below_the_landed_resolved_ts_and_version_zero(puller):
    puller.on_rows([row(create_job(5, 111), START), row(create_job(6, 112, version=0), START + 10)])
    assert puller.on_resolved(START + 100) == []


@pytest.mark.parametrize("value, message", [
    (b"\x80\x00\x00\x00\x00\x00", "has no job_meta"),
    (b"\x80\x00\x01\x00\x00\x00\x05\x03\x00{\x01]", "DDL job"),
])
def test_bad_job_rows_stop_the_feed(puller, value, message):
    bad = RowChange(DDL_JOB_TABLE_ID, START + 1, START, "put", record_key(DDL_JOB_TABLE_ID, 1), value, b"", 1)
    with pytest.raises(PullerError, match=message):
        puller.on_rows([bad])


def test_job_meta_column_found_by_name_in_the_stored_table_info(sim):
    from tests.capture.tidb_writes import TiDBWrites

    tidb = TiDBWrites(sim)
    tidb.dbs[1] = db_json(1, "mysql")
    job_table = table_json(DDL_JOB_TABLE_ID, "tidb_ddl_job")
    blob = {**job_table["cols"][2], "id": 9, "name": {"O": "job_meta", "L": "job_meta"}, "offset": 1,
            "type": {**job_table["cols"][2]["type"], "Tp": 251, "Charset": "binary", "Collate": "binary", "Flag": 128}}
    job_table["cols"] = [job_table["cols"][0], blob]
    ts = tidb.txn({meta_keys.db_info_key(1): json.dumps(tidb.dbs[1]).encode(),
                   meta_keys.table_info_key(1, DDL_JOB_TABLE_ID): json.dumps(job_table).encode()})

    from tidelake.upstream.kv_snapshot import SnapshotReader
    from tidelake.upstream.pd_client import PDClient

    with PDClient([sim.pd_address]) as pd, SnapshotReader(pd) as reader:
        found = JobRowDecoder.load(reader, ts)
        absent = JobRowDecoder.load(reader, ts - 1)
    assert found.column_id == 9 and absent.column_id == 5
    job = create_job(3, 111)
    assert DDLJob.from_json(found.job_meta(job_row(job, 9))).id == 3
    assert DDLJob.from_json(absent.job_meta(job_row(job, 5))).id == 3


def test_snapshot_rows_hold_selected_dbs_and_replicated_tables_once():
    rows = snapshot_rows(tracker(), 3)
    assert [(r.source, r.job_id, r.commit_ts, r.action, r.schema_name, r.table_id) for r in rows] == [
        (DdlSource.SNAPSHOT, 0, START, int(ActionType.NONE), None, 0),
        (DdlSource.SNAPSHOT, 0, START, int(ActionType.CREATE_SCHEMA), "shop", 0),
        (DdlSource.SNAPSHOT, 0, START, int(ActionType.CREATE_TABLE), "shop", 110),
    ]
    assert json.loads(rows[2].table_info)["name"]["O"] == "orders"


def test_fences_come_after_the_jobs_at_or_below_them_and_before_later_ones(puller):
    """A table joining every shard at J is added between the same two jobs on each (table_joins)."""
    a, b, c = create_job(7, 111), create_job(8, 112), create_job(9, 113)
    puller.on_rows([row(a, 1200), row(b, 1300), row(c, 1400)])
    puller.add_fence(1300)
    puller.add_fence(1350)
    puller.add_fence(1600)
    released = puller.on_resolved(1500)
    assert [getattr(item, "ts", None) or item.job.id for item in released] == [7, 8, 1300, 1350, 9]
    assert isinstance(released[2], Fence)
    assert puller.on_resolved(1600) == [Fence(1600)]
    with pytest.raises(ValueError, match="not ahead"):
        puller.add_fence(1600)
