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

from tests.capture.pull_harness import make_config, wait_resolved  # noqa: F401
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.nemesis.landing_check import BankSpec, check_landing, record_span
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import BANK_TABLES, WorkloadRunner, bank_total, get_preset

DB = "shop"


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    """(lake, cluster, bank spec): bank setup and 40 transfers landed by the real puller."""
    lake = tmp_path_factory.mktemp("landing") / "lake"
    cluster = SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        tidb = SimTiDB(cluster)
        workload = WorkloadRunner(tidb, "bank", seed=3, database=DB)
        with PullerThread(make_config(cluster, lake)) as puller:
            wait_resolved(lake, {}, 1, puller)
            workload.run_ops(5)
            funded = cluster.tso.next()
            workload.run_ops(40)
            last = cluster.tso.next()
            ids = [pid for name in BANK_TABLES for pid in tidb.table_info(DB, name).physical_ids()]
            wait_resolved(lake, {pid: last for pid in ids}, last, puller)
        columns = {}
        for name in BANK_TABLES:
            info = tidb.table_info(DB, name)
            balance = next(c.id for c in info.columns if c.name == "balance")
            columns.update({pid: balance for pid in info.physical_ids()})
        first = min(e.commit_ts for pid in columns for e in cluster.mvcc.snapshot_delta(*record_span(pid), 0)
                    if 0 < e.commit_ts <= funded)
        yield lake, cluster, BankSpec(columns, bank_total(get_preset("bank")), first)


def test_what_the_puller_landed_has_no_anomaly(landed):
    lake, cluster, bank = landed
    report = check_landing(str(lake), cluster.mvcc, bank)
    assert report.anomalies == []
    assert report.watermarks >= len(bank.physical_ids) and report.totals >= 2


def _damaged(lake: Path, tmp_path: Path, change) -> Path:
    """A copy of the lake with the changelog data file holding the newest change rewritten by
    `change`: nothing landed later can hide what was done to it."""
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    newest = max((copy / "_tidelake" / "changelog").rglob("*.parquet"),
                 key=lambda p: pc.max(pq.read_table(p, columns=["commit_ts"]).column("commit_ts")).as_py())
    pq.write_table(change(pq.read_table(newest)), newest)
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
    lake, cluster, bank = landed

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

    report = check_landing(str(_damaged(lake, tmp_path, change)), cluster.mvcc, bank)
    assert expected <= set(report.by_kind()), report.anomalies[:5]
