"""DDL job JSON (docs/wire.md#modeljob-json). Fixtures in tests/codec/data are hand-built from the fact
sheet in the exact shape TiDB's json.Marshal writes into tidb_ddl_job.job_meta."""

import json
from pathlib import Path

import pytest

from tidelake.codec.ddl_job import ActionType, DDLJob, JobState, SchemaState, copied_physical_ids
from tidelake.codec.schema import ColumnInfo, DBInfo, FieldType, PartitionDefinition, PartitionInfo, TableInfo
from tidelake.errors import InputError

DATA = Path(__file__).parent / "data"
JOB_FIXTURES = ["ddl_job_create_table.json", "ddl_job_create_schema_v2.json", "ddl_job_add_index_running.json"]


def _bytes(name: str) -> bytes:
    return (DATA / name).read_bytes().strip()


@pytest.mark.parametrize("name", JOB_FIXTURES)
def test_job_meta_round_trips_byte_for_byte(name: str) -> None:
    job = DDLJob.from_json(_bytes(name))
    assert job.to_json() == json.loads(_bytes(name))
    assert job.to_json_bytes() == _bytes(name)  # including Go's \u003c/\u003e/\u0026 escapes
    assert DDLJob.from_json(job.to_json_bytes()) == job


def test_create_table_job() -> None:
    job = DDLJob.from_json(_bytes("ddl_job_create_table.json"))
    assert job.type is ActionType.CREATE_TABLE and job.state is JobState.DONE and job.is_done()
    assert job.schema_state is SchemaState.PUBLIC
    assert (job.id, job.schema_id, job.table_id, job.schema_name, job.table_name) == (112, 2, 110, "shop", "sbtest1")
    assert job.schema_version == 54 and job.finished_ts == 0
    assert job.table_info is not None and job.table_info.pk_is_handle and job.table_info.name == "sbtest1"
    assert job.db_info is None and job.multiple_table_infos == []
    assert "a<b & c>d" in job.query
    assert job.involving_schema_info == [{"database": "shop", "table": "sbtest1"}]
    assert job.action_label == "create table"


def test_create_schema_job_v2_args() -> None:
    job = DDLJob.from_json(_bytes("ddl_job_create_schema_v2.json"))
    assert job.type is ActionType.CREATE_SCHEMA and job.version == 2
    assert job.db_info == DBInfo.from_json((DATA / "db_info.json").read_bytes())
    assert job.raw_args["db_info"]["db_name"]["O"] == "Shop"
    assert "involving_schema_info" not in job.to_json()  # omitempty


def test_running_job_is_not_done() -> None:
    job = DDLJob.from_json(_bytes("ddl_job_add_index_running.json"))
    assert job.state is JobState.RUNNING and not job.is_done()
    assert job.schema_state is SchemaState.WRITE_REORGANIZATION
    assert job.table_info is None and job.schema_version == 0


def test_simulator_built_job_matches_tidb_shape() -> None:
    table = TableInfo.from_json((DATA / "table_pk_is_handle.json").read_bytes())
    job = DDLJob(
        id=200,
        type=ActionType.TRUNCATE_TABLE,
        schema_id=2,
        table_id=110,
        schema_name="shop",
        table_name="sbtest1",
        state=JobState.DONE,
        schema_state=SchemaState.PUBLIC,
        query="TRUNCATE TABLE sbtest1",
        start_ts=10,
        schema_version=60,
        table_info=table,
    )
    out = job.to_json()
    reference = json.loads(_bytes("ddl_job_add_index_running.json"))
    assert list(out) == list(reference)
    assert list(out["binlog"]) == ["SchemaVersion", "DBInfo", "TableInfo", "FinishedTS", "MultipleTableInfos"]
    parsed = DDLJob.from_json(job.to_json_bytes())
    assert parsed.table_info == table and parsed.is_done() and parsed.type is ActionType.TRUNCATE_TABLE


def test_multiple_table_infos_and_lowercase_binlog_keys() -> None:
    table = json.loads((DATA / "table_pk_is_handle.json").read_text())
    other = dict(table, id=111, name={"O": "t2", "L": "t2"})
    binlog = {"schemaversion": 70, "multipletableinfos": [table, other], "finishedts": 5}
    raw = {"id": 9, "type": 47, "state": 4, "binlog": binlog}
    job = DDLJob.from_json(raw)
    assert job.type is ActionType.RENAME_TABLES and job.schema_version == 70 and job.finished_ts == 5
    assert [t.id for t in job.multiple_table_infos] == [110, 111]
    assert set(job.to_json()["binlog"]) == {"SchemaVersion", "DBInfo", "TableInfo", "FinishedTS", "MultipleTableInfos"}


def test_unknown_codes_are_kept_as_ints() -> None:
    job = DDLJob.from_json({"id": 1, "type": 200, "state": 42, "schema_state": 99})
    assert job.type == 200 and not isinstance(job.type, ActionType)
    assert job.state == 42 and not job.is_done()
    assert job.action_label == "unknown action 200"
    assert job.to_json()["type"] == 200


def test_action_codes_match_tidb() -> None:
    assert ActionType.MODIFY_COLUMN == 12 and ActionType.RENAME_TABLES == 47 and ActionType.CREATE_TABLES == 60
    assert ActionType.MULTI_SCHEMA_CHANGE == 61 and ActionType.ADD_PRIMARY_KEY == 32
    assert ActionType.TRUNCATE_TABLE_PARTITION == 23
    assert 66 not in {a.value for a in ActionType}
    assert ActionType.ADD_COLUMN.label == "add column" and ActionType.REBASE_AUTO_ID.label == "rebase auto_increment ID"
    assert JobState.DONE == 4 and JobState.SYNCED == 6 and JobState.PAUSING == 10


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": 3, "state": 4}, "missing key 'id'"),
        ({"id": 1, "state": 4}, "missing key 'type'"),
        ({"id": 1, "type": "create", "state": 4}, "'type'"),
        ({"id": 1, "type": 3, "state": 4, "binlog": [1]}, "'binlog' must be an object"),
        ({"id": 1, "type": 3, "state": 4, "binlog": {"TableInfo": {"id": 1}}}, "missing key 'name'"),
    ],
)
def test_bad_job_json(raw: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        DDLJob.from_json(raw)


def _table(column_ids: list[int], partition_ids: list[int] = ()) -> TableInfo:
    columns = [ColumnInfo(cid, f"c{i}", i, FieldType(3)) for i, cid in enumerate(column_ids)]
    part = PartitionInfo(1, "c0", definitions=[PartitionDefinition(p, f"p{p}") for p in partition_ids]) \
        if partition_ids else None
    return TableInfo(70, "t", columns=columns, partition=part)


def test_copied_ids_are_a_repartitionings_new_ids_or_every_id_of_a_reorganising_modify_column():
    """REORGANIZE PARTITION copies into new ids; a MODIFY COLUMN (alone or in a multi-schema change)
    that gave a column a new id rewrote every row of the table; one that kept the id rewrote none."""
    assert copied_physical_ids(ActionType.REORGANIZE_PARTITION, _table([1, 2], [80, 81]),
                               _table([1, 2], [80, 82, 83])) == [82, 83]
    assert copied_physical_ids(ActionType.MODIFY_COLUMN, _table([1, 2], [80, 81]), _table([1, 3], [80, 81])) == [80, 81]
    assert copied_physical_ids(ActionType.MULTI_SCHEMA_CHANGE, _table([1, 2]), _table([1, 3, 4])) == [70]
    assert copied_physical_ids(ActionType.MODIFY_COLUMN, _table([1, 2]), _table([1, 2])) == []  # VARCHAR widening
    assert copied_physical_ids(ActionType.MULTI_SCHEMA_CHANGE, _table([1, 2]), _table([1, 2, 3])) == []  # ADD only
    assert copied_physical_ids(ActionType.ADD_COLUMN, _table([1, 2]), _table([1, 2, 3])) == []
    assert copied_physical_ids(ActionType.MODIFY_COLUMN, None, _table([1])) == []
