"""DDL table: one row per (job, table), whatever the delivery count."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.errors import InputError
from tidelake.lake.ddl_log import DdlRow

APP = "tidelake-puller/cf"


def job(job_id: int, table_id: int = 41, source: str = "job", ts: int = 1000) -> DdlRow:
    return DdlRow(job_id, ts + job_id, 50 + job_id, 3, "create table", 2, "shop", table_id,
                  f"t{table_id}", f"CREATE TABLE t{table_id} (id INT)", '{"id": %d}' % table_id,
                  '{"id": 2}', source)


def _rows(layout):
    table = DeltaTable(layout.ddl).to_pyarrow_table()
    return sorted(zip(table["source"].to_pylist(), table["job_id"].to_pylist(),
                      table["table_id"].to_pylist()))


def test_redelivered_jobs_are_stored_once(layout):
    log = DdlWriter(layout, APP)
    assert log.insert([job(1), job(2), job(1)], seq=1)
    assert log.insert([job(2), job(3)], seq=2)
    assert _rows(layout) == [("job", 1, 41), ("job", 2, 41), ("job", 3, 41)]


def test_one_job_touching_two_tables_keeps_both_rows(layout):
    DdlWriter(layout, APP).insert([job(4, table_id=41), job(4, table_id=42)], seq=1)
    assert _rows(layout) == [("job", 4, 41), ("job", 4, 42)]


def test_snapshot_rows_are_told_apart_from_jobs(layout):
    DdlWriter(layout, APP).insert([job(0, table_id=41, source="snapshot"), job(7, table_id=41)], seq=1)
    assert _rows(layout) == [("job", 7, 41), ("snapshot", 0, 41)]


def test_replayed_sequence_is_skipped(layout):
    log = DdlWriter(layout, APP)
    assert log.insert([job(1)], seq=1)
    assert not log.insert([job(5)], seq=1)
    assert _rows(layout) == [("job", 1, 41)]


def test_all_fields_round_trip(layout):
    row = job(6)
    DdlWriter(layout, APP).insert([row], seq=1)
    (got,) = DeltaTable(layout.ddl).to_pyarrow_table().to_pylist()
    assert DdlRow(**got) == row


def test_unknown_source_is_input_error():
    with pytest.raises(InputError):
        job(1, source="replay")
