"""SimTiDB DML: keys and row values as TiDB writes them, Percolator visibility, handles, conflicts."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from tests.sim.tidb_fixtures import tidb  # noqa: F401 - fixture
from tidelake.codec import meta_keys as mk
from tidelake.codec.common_handle import encode_common_handle
from tidelake.codec.keys import record_key
from tidelake.codec.row_v2 import parse_row_v2
from tidelake.errors import InputError
from tidelake.sim.tidb.kvtxn import TxnConflictError, snapshot_get


@pytest.fixture
def shop(tidb):
    tidb.create_database("shop")
    tidb.create_table("shop", "orders", [("id", "bigint", "pk"), ("amount", "decimal(10,2)"), ("note", "varchar(20)")])
    tidb.create_table("shop", "acct", [("region", "varchar(8)", "pk"), ("no", "bigint", "pk"), ("bal", "int")],
                      clustered=True)
    tidb.create_table("shop", "log", [("msg", "varchar(20)"), ("n", "int")])
    return tidb


def test_int_pk_is_the_handle_and_not_in_the_value(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 7, "amount": Decimal("1.25"), "note": "x"})
    info = shop.table_info("shop", "orders")
    value = snapshot_get(shop.cluster, record_key(info.id, 7), t.commit_ts)
    stored_ids = set(parse_row_v2(value).spans)
    assert info.column_by_name("id").id not in stored_ids and len(stored_ids) == 2


def test_common_handle_is_the_encoded_pk(shop):
    with shop.txn() as t:
        t.insert("shop", "acct", {"region": "eu", "no": 3, "bal": 10})
    info = shop.table_info("shop", "acct")
    assert info.is_common_handle and not info.pk_is_handle
    handle = encode_common_handle(info, {"region": "eu", "no": 3})
    assert snapshot_get(shop.cluster, record_key(info.id, handle), t.commit_ts) is not None
    assert shop.select_all("shop", "acct") == [{"region": "eu", "no": 3, "bal": 10}]


def test_tables_without_clustered_pk_get_sequential_rowids_and_a_tid_key(shop):
    with shop.txn() as t:
        handles = [t.insert("shop", "log", {"msg": f"m{i}", "n": i}) for i in range(3)]
    assert handles == [1, 2, 3]
    info = shop.table_info("shop", "log")
    db_id = shop.catalog.db("shop").id
    base = snapshot_get(shop.cluster, mk.hash_key(mk.db_key(db_id), b"TID:%d" % info.id), shop.cluster.tso.next())
    assert int(base) >= 3
    assert [r["_tidb_rowid"] for r in shop.select_all("shop", "log")] == [1, 2, 3]
    with shop.txn() as t:
        assert t.update("shop", "log", {"_tidb_rowid": 2}, {"n": 20})
        assert t.delete("shop", "log", {"_tidb_rowid": 3})
    assert [(r["_tidb_rowid"], r["n"]) for r in shop.select_all("shop", "log")] == [(1, 0), (2, 20)]


def test_rows_are_visible_at_commit_ts_and_not_before(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 1, "amount": Decimal("2.00")})
        t.insert("shop", "log", {"msg": "a"})
    assert t.start_ts < t.commit_ts
    assert shop.select_all("shop", "orders", ts=t.commit_ts - 1) == []
    assert shop.select_all("shop", "orders", ts=t.commit_ts) == [{"id": 1, "amount": Decimal("2.00"), "note": None}]
    assert len(shop.select_all("shop", "log", ts=t.commit_ts)) == 1


def test_update_upsert_delete_and_duplicates(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 1, "note": "a"})
    with pytest.raises(InputError, match="Duplicate entry '1' for key 'orders.PRIMARY'"):
        with shop.txn() as t:
            t.insert("shop", "orders", {"id": 1})
    with shop.txn() as t:
        assert t.update("shop", "orders", {"id": 1}, {"note": "b"})
        assert not t.update("shop", "orders", {"id": 9}, {"note": "z"})
        t.upsert("shop", "orders", {"id": 2, "note": "c"})
    assert {r["id"]: r["note"] for r in shop.select_all("shop", "orders")} == {1: "b", 2: "c"}
    with shop.txn() as t:
        t.update("shop", "orders", {"id": 2}, {"id": 5})  # a PK change moves the row to a new key
        t.delete("shop", "orders", {"id": 1})
    assert shop.select_all("shop", "orders") == [{"id": 5, "amount": None, "note": "c"}]


def test_exception_rolls_back_and_leaves_no_lock(shop):
    with pytest.raises(RuntimeError):
        with shop.txn() as t:
            t.insert("shop", "orders", {"id": 1})
            t.prewrite()
            raise RuntimeError("boom")
    assert shop.cluster.mvcc.min_lock_ts(b"", b"") is None
    assert shop.select_all("shop", "orders") == []


def test_rows_before_add_column_keep_their_encoding(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 1, "note": "old"})
    info = shop.table_info("shop", "orders")
    before = snapshot_get(shop.cluster, record_key(info.id, 1), shop.cluster.tso.next())
    shop.add_column("shop", "orders", ("qty", "int", {"default": 4}))
    after = snapshot_get(shop.cluster, record_key(info.id, 1), shop.cluster.tso.next())
    assert after == before
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 2})
    rows = {r["id"]: r["qty"] for r in shop.select_all("shop", "orders")}
    assert rows == {1: 4, 2: 4}  # old row: origin default; new row: DEFAULT


def test_multi_table_txn_commits_everything_at_one_ts(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 1})
        t.insert("shop", "acct", {"region": "us", "no": 1, "bal": 1})
    tss = set()
    for table, handle in (("orders", 1), ("acct", encode_common_handle(shop.table_info("shop", "acct"),
                                                                        {"region": "us", "no": 1}))):
        key = record_key(shop.table_info("shop", table).id, handle)
        tss.add(shop.cluster.mvcc.get_with_commit_ts(key, shop.cluster.tso.next())[1])
    assert tss == {t.commit_ts}


def test_txn_writing_a_truncated_table_is_refused(shop):
    txn = shop.txn()
    txn.insert("shop", "orders", {"id": 1})
    shop.truncate_table("shop", "orders")
    with pytest.raises(TxnConflictError, match="schema is changed"):
        with txn:
            pass
    assert shop.select_all("shop", "orders") == []


def test_prewritten_txn_holds_its_lock_until_commit(shop):
    txn = shop.txn(lock_ttl_ms=60_000)
    txn.insert("shop", "orders", {"id": 1})
    txn.prewrite()
    assert shop.cluster.mvcc.min_lock_ts(b"", b"") == txn.start_ts
    txn.commit()
    assert shop.cluster.mvcc.min_lock_ts(b"", b"") is None


def test_write_conflict_is_reported_and_rolled_back(shop):
    with shop.txn() as t:
        t.insert("shop", "orders", {"id": 1})
    first, second = shop.txn(mode="optimistic"), shop.txn(mode="optimistic")
    first.update("shop", "orders", {"id": 1}, {"note": "first"})
    second.update("shop", "orders", {"id": 1}, {"note": "second"})
    first.commit()
    with pytest.raises(TxnConflictError):
        second.commit()
    assert shop.select_all("shop", "orders")[0]["note"] == "first"
    assert shop.cluster.mvcc.min_lock_ts(b"", b"") is None


def test_front_reads_decide_expired_async_commit_locks_by_their_secondaries(tidb):
    """An outside client's async-commit txn that stopped after prewrite (docs/wire.md#transactional-writes)."""
    mvcc, tso = tidb.cluster.mvcc, tidb.cluster.tso
    a, b, c = record_key(500, 1), record_key(500, 2), record_key(500, 3)
    start = tso.next()
    mvcc.prewrite([("put", a, b"A"), ("put", b, b"B")], a, start, 1, use_async_commit=True, secondaries=(b,))
    lost = tso.next()
    mvcc.prewrite([("put", c, b"C")], c, lost, 1, use_async_commit=True, secondaries=(record_key(500, 4),))
    time.sleep(0.01)
    ts = tso.next()
    assert (snapshot_get(tidb.cluster, a, ts), snapshot_get(tidb.cluster, b, ts)) == (b"A", b"B")
    assert snapshot_get(tidb.cluster, c, ts) is None
    assert mvcc.scan_locks(b"", b"", 2**64 - 1) == []
