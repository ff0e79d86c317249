"""The landing checker finds each kind of anomaly it names, and none in what the real puller landed.

The lake comes from the real puller on a simulated cluster running bank transfers; each damage
test rewrites one changelog data file of a copy (every Delta version that holds the file sees the
change, as with a corrupt object store) and expects the checker to name what was done.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.capture.pull_harness import make_config, sim, wait_resolved, watermarks  # noqa: F401 (sim is a fixture)
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.nemesis.landing_check import check_landing
from tidelake.sim.tidb.session import SimTiDB


def test_what_the_puller_landed_has_no_anomaly(landed):
    report = check_landing(str(landed.lake), landed.cluster.mvcc, landed.bank)
    assert report.anomalies == []
    assert report.watermarks >= len(landed.bank.physical_ids) and report.totals >= 2


def _damaged(lake: Path, tmp_path: Path, change) -> Path:
    """A copy of the lake with the changelog data file holding the newest change rewritten by
    `change`: nothing landed later can hide what was done to it."""
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    newest = max((copy / "_tidelake" / "changelog").rglob("*.parquet"),
                 key=lambda p: pc.max(pq.read_table(p, columns=["commit_ts"]).column("commit_ts")).as_py())
    pq.write_table(change(pq.read_table(newest)), newest)
    return copy


def _damaged_at(lake: Path, tmp_path: Path, ts: int, change) -> Path:
    """A copy of the lake with the first changelog data file holding a change at `ts` rewritten."""
    copy = tmp_path / "damaged"
    shutil.copytree(lake, copy)
    path = next(p for p in sorted((copy / "_tidelake" / "changelog").rglob("*.parquet"))
                if ts in pq.read_table(p, columns=["commit_ts"]).column("commit_ts").to_pylist())
    pq.write_table(change(pq.read_table(path)), path)
    return copy


def _puts(table: pa.Table) -> pa.Table:
    return table.filter(pc.equal(table.column("op"), "put"))


def _with_row(table: pa.Table, row: dict) -> pa.Table:
    return pa.concat_tables([table, pa.Table.from_pylist([row], schema=table.schema)])


@pytest.mark.parametrize("damage, expected", [
    ("drop_last_change", {"lost", "misordered"}),
    ("flip_a_value", {"wrong_value", "bank_total"}),
    ("repeat_with_other_value", {"conflicting_duplicate", "wrong_value"}),
    ("invent_a_key", {"phantom"}),
])
def test_each_damage_is_named(landed, tmp_path, damage, expected):

    def change(table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        if damage == "drop_last_change":  # every account was funded before: an older change stays
            newest = max(range(len(rows)), key=lambda i: rows[i]["commit_ts"])
            return pa.Table.from_pylist(rows[:newest] + rows[newest + 1:], schema=table.schema)
        put = max(_puts(table).to_pylist(), key=lambda r: r["commit_ts"])
        other = dict(put, value=put["value"][:-1] + bytes([put["value"][-1] ^ 1]))  # balance is the last column
        if damage == "flip_a_value":
            return pa.Table.from_pylist([other if r == put else r for r in rows], schema=table.schema)
        if damage == "repeat_with_other_value":
            return _with_row(table, other)
        return _with_row(table, dict(put, key=put["key"] + b"\x00"))

    report = check_landing(str(_damaged(landed.lake, tmp_path, change)), landed.cluster.mvcc, landed.bank)
    assert expected <= set(report.by_kind()), report.anomalies[:5]


def test_a_watermark_that_goes_back_is_named(landed, tmp_path):
    """A puller rewrites its partition with lower resolved ts than it had landed."""
    copy = tmp_path / "lake"
    shutil.copytree(landed.lake, copy)
    path = str(copy / "_tidelake" / "watermarks")
    table = DeltaTable(path).to_pyarrow_table()
    lowered = table.set_column(table.schema.get_field_index("resolved_ts"), "resolved_ts",
                               pa.array([1] * len(table), pa.int64()))
    puller = table.column("puller")[0].as_py()
    write_deltalake(path, lowered, mode="overwrite", predicate=f"puller = '{puller}'")
    report = check_landing(str(copy), landed.cluster.mvcc, landed.bank)
    assert "watermark_regressed" in report.by_kind(), report.anomalies[:3]


def test_a_table_leaving_though_the_rules_never_changed_is_named(landed, tmp_path):
    """A `filter` row (a DROP for the replica) that no change of [filter].rules asked for."""
    copy = tmp_path / "lake"
    shutil.copytree(landed.lake, copy)
    path = str(copy / "_tidelake" / "ddl")
    table = DeltaTable(path).to_pyarrow_table()
    last = table.slice(len(table) - 1).to_pylist()[0]
    write_deltalake(path, pa.Table.from_pylist([dict(last, source="filter", commit_ts=last["commit_ts"] + 1)],
                                               schema=table.schema), mode="append")
    report = check_landing(str(copy), landed.cluster.mvcc, landed.bank)
    assert [a.kind for a in report.anomalies] == ["table_left"], report.anomalies[:3]


def test_rows_a_ddl_rewrote_are_copies_at_its_ts_and_a_wrong_copy_is_named(sim, tmp_path):
    """REORGANIZE PARTITION rewrites every row of the partitions it replaces (TiDB's backfill);
    the puller lands them as puts at the job's finished ts, which the checker takes as copies
    only while they restate the upstream there."""
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    tidb.create_table("shop", "m", [("id", "bigint", "pk"), ("v", "int")],
                      partition={"type": "range", "column": "id", "bounds": [("p0", 10), ("p1", 20), ("p2", 30)]})
    with PullerThread(make_config(sim, lake)) as puller:
        wait_resolved(lake, {}, 1, puller)
        with tidb.txn() as txn:
            for i in range(25):
                txn.insert("shop", "m", {"id": i, "v": i})
        job = tidb.reorganize_partition("shop", "m", ["p0", "p1"], [("p01", ["20"])])
        with tidb.txn() as txn:
            txn.update("shop", "m", {"id": 3}, {"v": 33})
        last = sim.tso.next()
        wait_resolved(lake, {pid: last for pid in tidb.table_info("shop", "m").physical_ids()}, last, puller)
    report = check_landing(str(lake), sim.mvcc)
    assert report.anomalies == [] and report.copies >= 20, report.anomalies[:3]

    def change(table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        copied = next(r for r in rows if r["commit_ts"] == job.finished_ts)
        return pa.Table.from_pylist([dict(r, value=r["value"] + b"\x00") if r is copied else r for r in rows],
                                    schema=table.schema)

    damaged = _damaged_at(lake, tmp_path, job.finished_ts, change)
    assert "phantom" in check_landing(str(damaged), sim.mvcc).by_kind()


def test_an_id_a_ddl_removed_must_be_complete_up_to_the_ddl_once_the_ddl_watermark_passed_it(sim, tmp_path):
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    tidb.create_table("shop", "m", [("id", "bigint", "pk"), ("v", "int")],
                      partition={"type": "range", "column": "id", "bounds": [("p0", 10), ("p1", 20)]})
    p0, p1 = tidb.table_info("shop", "m").physical_ids()
    with PullerThread(make_config(sim, lake)) as puller:
        wait_resolved(lake, {}, 1, puller)
        with tidb.txn() as txn:
            for i in range(20):
                txn.insert("shop", "m", {"id": i, "v": i})
        dropped = tidb.drop_partition("shop", "m", "p1").finished_ts
        wait_resolved(lake, {p0: dropped}, dropped, puller)
        mark = watermarks(lake).table_resolved[p1]  # where p1 left the feed: it moves no more
        later = sim.tso.next()
        wait_resolved(lake, {p0: later}, later, puller)
    complete = check_landing(str(lake), sim.mvcc, removed_ids=[(p1, dropped), (p1 + 1000, dropped)])
    assert complete.anomalies == [] and complete.removed == 1  # an id the lake never fed is not asked
    assert watermarks(lake).table_resolved[p1] == mark and dropped - 1 <= mark < later - 2
    # As a restart that stopped feeding p1 leaves it: a DDL after its watermark + 1 removed it.
    behind = check_landing(str(lake), sim.mvcc, removed_ids=[(p1, mark + 2)])
    assert [(a.kind, a.table_id) for a in behind.anomalies] == [("removed_behind", p1)]
    not_due = check_landing(str(lake), sim.mvcc, removed_ids=[(p1, watermarks(lake).ddl_resolved + 1)])
    assert not_due.anomalies == [] and not_due.removed == 0  # the DDL watermark has not passed it yet
