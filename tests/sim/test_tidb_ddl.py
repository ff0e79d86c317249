"""SimTiDB DDL: meta keys readable with the codec, job rows as TiCDC reads them, TiDB's step order."""

from __future__ import annotations

import json

import pytest

from tests.sim.tidb_fixtures import tidb  # noqa: F401 - fixture
from tidelake.codec import meta_keys as mk
from tidelake.codec.ddl_job import ActionType, DDLJob, JobState
from tidelake.codec.keys import (
    DDL_JOB_TABLE_ID,
    decode_record_key,
    record_key,
    table_record_span,
)
from tidelake.codec.row import decode_row
from tidelake.codec.schema import DBInfo, TableInfo
from tidelake.errors import InputError
from tidelake.sim.tidb import system_tables as st
from tidelake.sim.tidb.kvtxn import snapshot_get, snapshot_scan
from tidelake.sim.tidb.session import SimTiDB

COLUMNS = [("id", "bigint", "pk"), ("v", "varchar(32)"), ("n", "int")]


def meta_at(tidb: SimTiDB, ts: int) -> dict[str, object]:
    """Decode every DB and table from the meta keys at ts, as a schema snapshot reader would."""
    cluster = tidb.cluster
    dbs = {}
    for key, value in snapshot_scan(cluster, *mk.hash_span(mk.DBS), ts):
        db = DBInfo.from_json(value)
        assert mk.decode_meta_key(key).field == mk.db_key(db.id)
        tables = {}
        for tkey, tvalue in snapshot_scan(cluster, *mk.hash_span(mk.db_key(db.id)), ts):
            field = mk.decode_meta_key(tkey).field
            if mk.parse_table_field(field) is not None:
                info = TableInfo.from_json(tvalue)
                assert mk.parse_table_field(field) == info.id
                tables[info.name] = info
        dbs[db.name] = (db, tables)
    return dbs


def job_row_at(tidb: SimTiDB, job_id: int, ts: int) -> DDLJob | None:
    value = snapshot_get(tidb.cluster, record_key(DDL_JOB_TABLE_ID, job_id), ts)
    if value is None:
        return None
    # docs/wire.md#tidb_ddl_job-row: TiCDC finds job_meta by name in the table's schema
    row = decode_row(value, st.ddl_job_table(), job_id)
    return DDLJob.from_json(row["job_meta"])


def test_bootstrap_writes_mysql_schema_and_counters(tidb):
    ts = tidb.cluster.tso.next()
    dbs = meta_at(tidb, ts)
    mysql, tables = dbs["mysql"]
    job_table = tables["tidb_ddl_job"]
    assert job_table.id == 281474976710654
    assert [(c.id, c.name) for c in job_table.columns][4] == (5, "job_meta")
    assert job_table.pk_is_handle
    assert int(snapshot_get(tidb.cluster, mk.string_key(mk.NEXT_GLOBAL_ID), ts)) == st.FIRST_USER_ID
    assert int(snapshot_get(tidb.cluster, mk.string_key(mk.SCHEMA_VERSION_KEY), ts)) == tidb.schema_version


def test_create_table_meta_and_done_job_row(tidb):
    db_job = tidb.create_database("shop")
    job = tidb.create_table("shop", "orders", COLUMNS)
    dbs = meta_at(tidb, job.finished_ts)
    db, tables = dbs["shop"]
    assert db.id == db_job.schema_id and tables["orders"].id == job.table_id
    assert tables["orders"].pk_is_handle
    row_job = job_row_at(tidb, job.id, job.finished_ts)
    assert row_job.state == JobState.DONE and row_job.type == ActionType.CREATE_TABLE
    assert row_job.schema_version == job.schema_version > db_job.schema_version
    assert row_job.finished_ts == 0  # TiDB leaves it 0 in tidb_ddl_job; TiCDC fills the commit ts
    assert row_job.table_info.id == job.table_id and row_job.table_info.name == "orders"
    assert row_job.query.startswith("CREATE TABLE `orders`")
    next_id = int(snapshot_get(tidb.cluster, mk.string_key(mk.NEXT_GLOBAL_ID), job.finished_ts))
    assert next_id >= job.table_id > job.id - 1
    # the job row is gone once the job is synced; the history row keeps it
    assert job_row_at(tidb, job.id, tidb.cluster.tso.next()) is None
    assert snapshot_get(tidb.cluster, record_key(st.DDL_HISTORY_TABLE_ID, job.id), tidb.cluster.tso.next())
    diff = json.loads(snapshot_get(tidb.cluster, mk.string_key(mk.diff_key(job.schema_version)), job.finished_ts))
    assert diff["type"] == 3 and diff["table_id"] == job.table_id


def test_job_row_lifecycle_follows_schema_states(tidb):
    tidb.create_database("d")
    tidb.create_table("d", "t", COLUMNS)
    seen = []

    def observe(batch):
        for entry in batch.entries:
            if batch.kind == "commit" and entry.key[:9] == record_key(DDL_JOB_TABLE_ID, 0)[:9]:
                job = None
                if entry.op == "put":
                    job = DDLJob.from_json(decode_row(entry.value, st.ddl_job_table(), 0)["job_meta"])
                seen.append((entry.op, job and int(job.state), job and int(job.schema_state)))

    tidb.cluster.mvcc.add_observer(observe)
    tidb.add_column("d", "t", ("c", "int", {"default": 3}))
    assert seen == [("put", 8, 0), ("put", 1, 1), ("put", 1, 2), ("put", 1, 3), ("put", 4, 5), ("delete", None, None)]


def test_every_ddl_kind_has_its_action_code_and_versions_increase(tidb):
    jobs = [
        tidb.create_database("d"),
        tidb.create_table("d", "t", COLUMNS),
        tidb.create_table("d", "r", [("id", "bigint", "pk"), ("v", "int")],
                          partition={"type": "range", "column": "id", "bounds": [("p0", 100), ("p1", 200)]}),
        tidb.add_column("d", "t", ("c", "int")),
        tidb.rename_column("d", "t", "c", "c2"),
        tidb.modify_column("d", "t", "c2", "bigint"),
        tidb.add_index("d", "t", "i_v", ["v"]),
        tidb.drop_index("d", "t", "i_v"),
        tidb.drop_column("d", "t", "c2"),
        tidb.truncate_table("d", "t"),
        tidb.rename_table("d", "t", "t2"),
        tidb.add_partition("d", "r", "p2", 300),
        tidb.truncate_partition("d", "r", "p0"),
        tidb.drop_partition("d", "r", "p1"),
        tidb.drop_table("d", "t2"),
        tidb.drop_database("d"),
    ]
    assert [int(j.type) for j in jobs] == [1, 3, 3, 5, 12, 12, 7, 8, 6, 11, 14, 19, 23, 20, 4, 2]
    versions = [j.schema_version for j in jobs]
    assert versions == sorted(set(versions))
    assert [j.finished_ts for j in jobs] == sorted(j.finished_ts for j in jobs)
    for job in jobs:
        stored = job_row_at(tidb, job.id, job.finished_ts)
        assert stored.state == JobState.DONE and stored.schema_version == job.schema_version
    assert "d" not in meta_at(tidb, tidb.cluster.tso.next())


def test_truncate_gives_new_physical_id_and_old_rows_stay_behind(tidb):
    tidb.create_database("d")
    old = tidb.create_table("d", "t", COLUMNS).table_id
    with tidb.txn() as t:
        t.insert("d", "t", {"id": 1, "v": "a"})
    job = tidb.truncate_table("d", "t")
    assert job.table_id == old and job.table_info.id != old
    assert tidb.select_all("d", "t") == []
    assert len(snapshot_scan(tidb.cluster, *table_record_span(old), tidb.cluster.tso.next())) == 1
    diff = json.loads(snapshot_get(tidb.cluster, mk.string_key(mk.diff_key(job.schema_version)), job.finished_ts))
    assert (diff["table_id"], diff["old_table_id"]) == (job.table_info.id, old)


def test_partitions_get_physical_ids_and_rows_route_to_them(tidb):
    tidb.create_database("d")
    rng = tidb.create_table("d", "r", [("id", "bigint", "pk")],
                            partition={"type": "range", "column": "id", "bounds": [("p0", 10), ("p1", "MAXVALUE")]})
    hsh = tidb.create_table("d", "h", [("id", "bigint", "pk")], partition={"type": "hash", "column": "id", "count": 3})
    r_ids, h_ids = rng.table_info.physical_ids(), hsh.table_info.physical_ids()
    assert len(set(r_ids + h_ids + [rng.table_id, hsh.table_id])) == 7
    with tidb.txn() as t:
        for i in (5, 50):
            t.insert("d", "r", {"id": i})
        for i in (3, 4, -4):
            t.insert("d", "h", {"id": i})
    ts = tidb.cluster.tso.next()
    where = {pid: [decode_record_key(k)[1] for k, _ in snapshot_scan(tidb.cluster, *table_record_span(pid), ts)]
             for pid in r_ids + h_ids}
    assert where[r_ids[0]] == [5] and where[r_ids[1]] == [50]
    assert where[h_ids[0]] == [3] and sorted(where[h_ids[1]]) == [-4, 4]  # |v mod 3| as TiDB
    job = tidb.truncate_partition("d", "r", "p0")
    assert job.table_info.physical_ids()[0] not in r_ids and tidb.select_all("d", "r") == [{"id": 50}]


def test_schema_snapshot_at_a_ts_sees_the_shape_of_that_ts(tidb):
    tidb.create_database("d")
    created = tidb.create_table("d", "t", COLUMNS)
    added = tidb.add_column("d", "t", ("c", "int"))
    assert [c.name for c in tidb.table_info_at("d", "t", created.finished_ts).columns] == ["id", "v", "n"]
    assert [c.name for c in tidb.table_info_at("d", "t", added.finished_ts).columns] == ["id", "v", "n", "c"]


def test_bad_ddl_is_refused_without_side_effects(tidb):
    tidb.create_database("d")
    tidb.create_table("d", "t", COLUMNS)
    version = tidb.schema_version
    with pytest.raises(InputError):
        tidb.create_table("d", "t", COLUMNS)
    with pytest.raises(InputError, match="Unknown column 'nope'"):
        tidb.modify_column("d", "t", "nope", "int")
    with pytest.raises(InputError):
        tidb.drop_column("d", "t", "id")
    assert tidb.schema_version == version


def test_a_second_front_loads_the_schema_from_meta_keys(tidb):
    tidb.create_database("d")
    tidb.create_table("d", "t", COLUMNS)
    other = SimTiDB(tidb.cluster)
    assert [(db, name) for db, name, _ in other.tables()] == [("d", "t")]
    assert other.create_table("d", "u", COLUMNS).table_id > tidb.catalog.next_global_id - 1
