"""`landed`: bank setup and 40 transfers landed by the real puller on a simulated cluster, shared by
the checker tests of this folder (the cluster stays up: the checkers read its MVCC)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.capture.pull_harness import make_config, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.nemesis.landing_check import BankSpec, record_span
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import BANK_TABLES, WorkloadRunner, bank_total, get_preset

DB = "shop"


@dataclass
class Landed:
    lake: Path
    cluster: SimCluster
    tidb: SimTiDB
    bank: BankSpec
    mid_ts: int  # a whole second before final_ts, so a 1 s syncpoint boundary lies between them
    final_ts: int


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
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
            workload.run_ops(20)
            mid = cluster.tso.next()
            time.sleep(1.2)  # a whole second: a 1 s syncpoint boundary falls between mid and last
            workload.run_ops(20)
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
        yield Landed(lake, cluster, tidb, BankSpec(columns, bank_total(get_preset("bank")), first), mid, last)
