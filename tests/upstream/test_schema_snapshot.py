"""Schema snapshot at a ts from TiDB meta keys written as TiDB writes them (docs/metadata.md#tidb-meta-structure-m-keys)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tidelake.codec import meta_keys
from tidelake.codec.keys import record_key
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_snapshot import load_schema
from tidelake.upstream.upstream_errors import UpstreamError

DATA = Path(__file__).resolve().parents[1] / "codec" / "data"


def fixture(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def db_json(db_id: int, name: str, state: int = 5) -> dict:
    obj = copy.deepcopy(fixture("db_info"))
    obj.update(id=db_id, db_name={"O": name, "L": name.lower()}, state=state)
    return obj


def table_json(source: str, table_id: int, name: str, **changes) -> dict:
    obj = copy.deepcopy(fixture(source))
    obj.update(id=table_id, name={"O": name, "L": name.lower()}, **changes)
    return obj


def write_meta(sim, puts: dict[bytes, bytes]) -> int:
    """One TiDB-like meta transaction (DDL step); returns its commit ts."""
    start = sim.tso.next()
    keys = list(puts)
    sim.mvcc.prewrite([("put", k, v) for k, v in puts.items()], keys[0], start, 3000)
    commit_ts = sim.tso.next()
    sim.mvcc.commit(keys, start, commit_ts)
    return commit_ts


def put_db(db: dict) -> dict[bytes, bytes]:
    return {meta_keys.db_info_key(db["id"]): json.dumps(db).encode()}


def put_table(db_id: int, table: dict) -> dict[bytes, bytes]:
    return {
        meta_keys.table_info_key(db_id, table["id"]): json.dumps(table).encode(),
        meta_keys.hash_key(meta_keys.db_key(db_id), f"TID:{table['id']}".encode()): b"5000",
    }


def schema_version(v: int) -> dict[bytes, bytes]:
    return {meta_keys.string_key(meta_keys.SCHEMA_VERSION_KEY): str(v).encode()}


@pytest.fixture
def meta(sim):
    """mysql + shop (3 tables, one partitioned, one view) + test, as of a ts; later DDL after it."""
    mysql = db_json(1, "mysql")
    shop = db_json(2, "Shop")
    test = db_json(3, "test")
    view = table_json("table_pk_is_handle", 140, "recent", view={"view_select": "select 1"})
    write_meta(sim, {
        **put_db(mysql), **put_table(1, table_json("table_pk_is_handle", 10, "user")),
        **put_db(shop),
        **put_table(2, table_json("table_pk_is_handle", 110, "sbtest1")),
        **put_table(2, table_json("table_partitioned", 130, "events")),
        **put_table(2, table_json("table_common_handle", 120, "Orders", state=3)),  # write reorganization
        **put_table(2, view),
        **put_db(test), **put_table(3, table_json("table_pk_is_handle", 150, "scratch")),
        **schema_version(41),
    })
    ts = sim.tso.next()
    write_meta(sim, {**put_table(2, table_json("table_pk_is_handle", 160, "later")), **schema_version(42)})
    return ts


def names(snapshot) -> dict[str, list[str]]:
    return {db.name: sorted(t.name for t in snapshot.tables[db.id]) for db in snapshot.dbs}


def test_schema_at_ts_skips_system_schemas_and_later_ddl(sim, reader, meta):
    snapshot = load_schema(reader, meta)
    assert names(snapshot) == {"Shop": ["Orders", "events", "recent", "sbtest1"], "test": ["scratch"]}
    assert snapshot.schema_version == 41
    assert load_schema(reader, sim.tso.next()).schema_version == 42
    assert "later" in names(load_schema(reader, sim.tso.next()))["Shop"]


def test_partitions_views_and_in_flight_states(reader, meta):
    snapshot = load_schema(reader, meta)
    with_rows = {t.name: snapshot.physical_ids(t) for _, t in snapshot.tables_with_rows()}
    assert with_rows == {"sbtest1": [110], "events": [131, 132], "Orders": [120], "scratch": [150]}
    assert snapshot.in_flight == ["table Shop.Orders is write reorganization"]


def test_table_filter_applies_to_schemas_and_tables(reader, meta):
    f = TableFilter.parse(["shop.*", "!shop.sb*", "mysql.*"])
    assert names(load_schema(reader, meta, f)) == {"Shop": ["Orders", "events", "recent"]}


def test_bad_meta_json_is_a_clear_error(sim, reader):
    write_meta(sim, {meta_keys.db_info_key(9): b"{not json"})
    with pytest.raises(UpstreamError, match="cannot parse DBs/DB:9"):
        load_schema(reader, sim.tso.next())


def test_snapshot_and_rows_read_at_the_same_ts(sim, reader, meta):
    """The bootstrap pattern: schema and rows at one ts give a consistent pair."""
    start = sim.tso.next()
    sim.mvcc.prewrite([("put", record_key(131, 1), b"r1")], record_key(131, 1), start, 3000)
    sim.mvcc.commit([record_key(131, 1)], start, sim.tso.next())
    ts = sim.tso.next()
    snapshot = load_schema(reader, ts)
    events = next(t for _, t in snapshot.tables_with_rows() if t.name == "events")
    assert list(reader.scan_table(snapshot.physical_ids(events), ts)) == [(record_key(131, 1), b"r1")]
