"""The puller under the sim front's transaction modes: TiDB's default (pessimistic locks, async
commit, 1PC, 2PC fallback for big transactions) and classic optimistic 2PC.

The oracle is the simulator's MVCC write records after the puller's start ts: the changelog must
equal them exactly, whatever protocol committed each transaction (docs/wire.md#the-simulators-own-front-tidbs-transaction-modes).
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    changelog,
    make_config,
    oracle,
    sim,
    start_ts,
    wait_resolved,
)
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import PRESETS, WorkloadRunner

SETUP_OPS = 8  # the mixed workload's CREATE DATABASE and seven CREATE TABLEs
# mixed traffic over several tables, some txns beyond async commit's 256 keys, a lock-holding txn now
# and then, no DDL
PRESET = dataclasses.replace(PRESETS["mixed"], txn_sizes=((50, 1), (30, 10), (12, 100), (8, 300)), ddl_every=0,
                             long_txn_every=25, long_txn_hold_s=0.5)


@pytest.mark.parametrize("mode", ["pessimistic", "optimistic"])
def test_puller_lands_exactly_the_committed_records_in_each_txn_mode(sim, tmp_path, mode):
    lake = tmp_path / "lake"
    tidb = SimTiDB(sim, txn_mode=mode)
    runner = WorkloadRunner(tidb, PRESET, seed=11, database="shop")
    runner.run_ops(SETUP_OPS)
    with PullerThread(make_config(sim, lake)) as run:
        start = start_ts(lake, run)
        runner.run_ops(120)
        runner.stop()
        last = sim.tso.next()
        pids = [pid for db, _, info in tidb.tables() if db == "shop" for pid in info.physical_ids()]
        wait_resolved(lake, {pid: last for pid in pids}, runner=run)
    assert run.error is None
    counters = runner.counters.snapshot()
    assert counters["errors"] == 0 and counters["long_txns"] >= 4, counters
    if mode == "pessimistic":  # every protocol TiDB uses by default ran
        assert min(counters["one_pc"], counters["async_commit"], counters["two_pc"]) > 0, counters
    else:
        assert counters["one_pc"] == counters["async_commit"] == 0 and counters["two_pc"] > 0, counters
    expected = set().union(*(oracle(sim, pid, start) for pid in pids))
    assert set(changelog(lake)) == expected and expected
