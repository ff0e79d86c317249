"""Workloads: same seed -> same statements; every preset runs cleanly against a SimTiDB."""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import pytest

from tests.sim.tidb_fixtures import tidb  # noqa: F401 - fixture
from tidelake.errors import InputError
from tidelake.sim.tidb.types import parse_field_type
from tidelake.nemesis.schedule import SETUP_OPS, workload_preset
from tidelake.sim.workload import (
    BANK_INITIAL_BALANCE,
    BANK_TABLES,
    DDL_WEIGHTS,
    PRESETS,
    DdlOp,
    TxnOp,
    WorkloadPlanner,
    WorkloadRunner,
    bank_total,
    get_preset,
)


@pytest.mark.parametrize("name", ["smoke", "mixed", "ddl-heavy", "hot", "long-txn", "bank", "bank-optimistic"])
def test_same_seed_same_statements(name):
    first = WorkloadPlanner(PRESETS[name], seed=11).take(200)
    again = WorkloadPlanner(PRESETS[name], seed=11).take(200)
    other = WorkloadPlanner(PRESETS[name], seed=12).take(200)
    assert first == again
    assert first != other


def test_ddl_heavy_plans_every_ddl_kind():
    methods = {op.method for op in WorkloadPlanner(PRESETS["ddl-heavy"], seed=1).take(3000) if isinstance(op, DdlOp)}
    assert methods >= {"create_database", "drop_database", "create_table", "drop_table", "truncate_table",
                       "rename_table", "add_column", "drop_column", "rename_column", "modify_column", "add_index",
                       "drop_index", "add_partition", "drop_partition", "truncate_partition", "rename_tables",
                       "alter_partitioning", "remove_partitioning", "create_table_like", "exchange_partition",
                       "reorganize_partition"}


def test_nemesis_mixed_plans_every_ddl_kind_many_times():
    """Over ~300 DDL rounds of the nemesis's mixed preset, every kind is drawn, the rarer ones
    (moves between tables and partitions, swaps, key and multi-schema changes) many times."""
    ops = WorkloadPlanner(workload_preset("mixed"), seed=5, database="nemesis").take(SETUP_OPS["mixed"] + 300 * 15)
    kinds = Counter(op.kind for op in ops if isinstance(op, DdlOp) and op.kind)
    assert set(kinds) >= set(DDL_WEIGHTS), set(DDL_WEIGHTS) - set(kinds)
    for kind in ("exchange_partition", "swap_tables", "partition_by", "remove_partitioning", "reorganize_partition",
                 "multi_schema_change", "add_primary_key", "drop_primary_key", "modify_column_reorg"):
        assert kinds[kind] >= 8, (kind, kinds)
    assert sum(isinstance(op, TxnOp) for op in ops) > 10 * sum(kinds.values())  # DML stays dominant


def test_nemesis_mixed_ddl_runs_on_the_simulator_as_the_planner_believes(tidb):
    """The new kinds run without an error, and what the planner believes afterwards is the upstream's
    schema: the same tables, each with the columns the planner writes, a NONCLUSTERED primary key
    exactly where it planned one, and the new column types of its MODIFY COLUMNs."""
    runner = WorkloadRunner(tidb, workload_preset("mixed"), seed=8, database="nemesis")
    runner.run_ops(SETUP_OPS["mixed"] + 80 * 15)
    runner.run_ops(len(runner.planner._pending))
    runner.stop()
    counters = runner.counters
    assert counters.errors == 0, counters.last_error
    for kind in ("multi_schema_change", "add_primary_key", "drop_primary_key", "modify_column_reorg",
                 "exchange_partition", "swap_tables", "partition_by", "remove_partitioning"):
        assert counters.ddl_kinds[kind] >= 1, (kind, counters.ddl_kinds)
    assert sum(counters.ddl_kinds.values()) == counters.ddls
    model = {(t.db, t.name): t for t in runner.planner._tables.values()}
    assert set(model) == {(db, name) for db, name, _ in tidb.tables()}
    for (db, name), table in model.items():
        info = tidb.table_info(db, name)
        types = {c.name: c for c in info.columns}
        assert {n for n, _ in table.columns} <= set(types), (name, table.columns)
        primary = info.primary_index()
        nonclustered = primary is not None and not info.pk_is_handle and not info.is_common_handle
        assert nonclustered == (table.handle == "rowid" and bool(table.pk)), name
        for column, type_spec in table.columns:
            if type_spec in ("varchar(16)", "decimal(20,0)", "decimal(24,0)"):
                assert types[column].field_type.tp == parse_field_type(type_spec).tp, (name, column)


def test_size_mix_and_long_txns_follow_the_preset():
    ops = WorkloadPlanner(PRESETS["long-txn"], seed=3).take(400)
    long = [op for op in ops if isinstance(op, TxnOp) and op.hold_s]
    assert long and all(op.hold_s == PRESETS["long-txn"].long_txn_hold_s for op in long)
    sizes = {len(op.rows) for op in ops if isinstance(op, TxnOp) and not op.hold_s}
    assert sizes == {1, 10}


def test_preload_comes_in_unpaced_chunks_before_traffic_and_is_never_truncated():
    planner = WorkloadPlanner(PRESETS["ddl-heavy"], seed=1, preload_rows=25_000)
    ops = planner.take(3000)
    preload = [op for op in ops if isinstance(op, TxnOp) and op.preload]
    assert [len(op.rows) for op in preload] == [10_000, 10_000, 5_000]
    first_traffic = next(i for i, op in enumerate(ops) if isinstance(op, TxnOp) and not op.preload)
    assert max(ops.index(op) for op in preload) < first_traffic
    assert {r.table for op in preload for r in op.rows} == {"orders"}
    truncated = {op.args["name"] for op in ops if isinstance(op, DdlOp) and op.method == "truncate_table"}
    assert truncated and "orders" not in truncated
    assert WorkloadPlanner(PRESETS["ddl-heavy"], seed=1).take(50) != ops[:50]


def test_preloaded_rows_are_in_the_table_and_the_traffic_touches_them(tidb):
    runner = WorkloadRunner(tidb, "mixed", seed=6, preload_rows=3000)
    ops = runner.planner.take(1 + 7 + 1 + 300)
    for op in ops:
        runner._execute(op)
    assert runner.counters.preloaded == 3000 and runner.counters.errors == 0
    model = runner.planner._tables[("sim", "orders")]
    assert len(tidb.select_all("sim", "orders")) == len(model.keys) > 2000
    touched = {r.key["id"] for op in ops if isinstance(op, TxnOp) and not op.preload for r in op.rows
               if r.table == "orders" and r.kind in ("update", "delete")}
    assert any(key <= 3000 for key in touched)


def test_ddl_heavy_runs_without_errors_and_planner_model_matches_the_database(tidb):
    # Seed 13's first 400 ops swap, exchange and repartition. (The planner guesses a rowid table's
    # _tidb_rowid from 1 after a TRUNCATE, where TiDB goes on after the old table's ids: a seed that
    # writes such a table after truncating it leaves a few of its updates hitting no row.)
    runner = WorkloadRunner(tidb, "ddl-heavy", seed=13)
    assert {op.method for op in WorkloadPlanner(PRESETS["ddl-heavy"], seed=13).take(400) if isinstance(op, DdlOp)} >= {
        "rename_tables", "exchange_partition", "reorganize_partition", "alter_partitioning", "remove_partitioning"}
    runner.run_ops(400)
    runner.run_ops(len(runner.planner._pending))  # the model is a planned batch ahead
    counters = runner.counters
    assert counters.errors == 0, counters.last_error
    assert counters.ddls > 20 and counters.txns > 200
    model = {(t.db, t.name): len(t.keys) for t in runner.planner._tables.values()}
    actual = {(db, name): len(tidb.select_all(db, name)) for db, name, _ in tidb.tables()}
    assert actual == model


def test_runner_thread_paces_and_stops_without_leaving_locks(tidb):
    preset = dataclasses.replace(PRESETS["long-txn"], rate=200.0, long_txn_every=10, long_txn_hold_s=0.5)
    runner = WorkloadRunner(tidb, preset, seed=2)
    runner.start()
    time.sleep(1.0)
    runner.stop()
    counters = runner.counters.snapshot()
    assert counters["txns"] > 20 and counters["long_txns"] >= 1 and counters["errors"] == 0
    assert tidb.cluster.mvcc.min_lock_ts(b"", b"") is None


def test_unknown_preset_and_bad_rate_are_input_errors(tidb):
    with pytest.raises(InputError):
        get_preset("nope")
    with pytest.raises(InputError):
        WorkloadRunner(tidb, "smoke", rate=0)


@pytest.mark.slow
def test_bulk_preset_writes_a_100k_row_transaction(tidb):
    runner = WorkloadRunner(tidb, "bulk", seed=0)
    planner = runner.planner
    while True:
        op = next(planner)
        runner._execute(op)
        if isinstance(op, TxnOp) and len(op.rows) == 100_000:
            break
    assert runner.counters.errors == 0
    assert len(tidb.select_all("sim", "orders")) >= 100_000


@pytest.mark.parametrize(("name", "mode"), [("bank", "pessimistic"), ("bank-optimistic", "optimistic")])
def test_bank_total_is_constant_at_every_snapshot_while_transfers_run(tidb, name, mode):
    """The sim's own snapshot read of all bank tables at several ts, taken while the runner
    thread commits transfers, always sums to the funded total (issue #15 item 1), in TiDB's
    default transaction mode and in the classic optimistic one."""
    preset = dataclasses.replace(PRESETS[name], rate=400.0)
    runner = WorkloadRunner(tidb, preset, seed=4)
    assert runner.txn_mode == mode
    runner.run_ops(1 + len(BANK_TABLES) + 1)  # database, tables, the funding txn
    runner.start()
    snapshots = []
    try:
        for _ in range(6):
            time.sleep(0.15)
            ts = tidb.cluster.tso.next()
            snapshots.append({t: sorted(r["balance"] for r in tidb.select_all("sim", t, ts)) for t in BANK_TABLES})
    finally:
        runner.stop()
    counters = runner.counters.snapshot()
    assert counters["errors"] == 0 and counters["txns"] > 30, counters
    assert [sum(map(sum, snap.values())) for snap in snapshots] == [bank_total(preset)] * 6
    assert all(len(balances) == preset.bank_accounts for snap in snapshots for balances in snap.values())
    assert snapshots[-1] != snapshots[0]
    assert any(b != BANK_INITIAL_BALANCE for balances in snapshots[-1].values() for b in balances)
    assert tidb.cluster.mvcc.min_lock_ts(b"", b"") is None
    infos = {t: tidb.table_info("sim", t) for t in BANK_TABLES}
    assert len(infos["bank_range"].physical_ids()) == 2 and infos["bank_clustered"].is_common_handle
    assert not infos["bank_nopk"].pk_is_handle and not infos["bank_nopk"].is_common_handle


def test_bank_has_no_orders_to_preload():
    with pytest.raises(InputError, match="orders"):
        WorkloadPlanner(PRESETS["bank"], preload_rows=10)


def test_bank_transfers_cross_tables():
    ops = WorkloadPlanner(PRESETS["bank"], seed=9).take(200)
    transfers = [op for op in ops if isinstance(op, TxnOp) and op.rows[0].kind == "add"]
    assert all(sum(r.changes["balance"] for r in op.rows) == 0 for op in transfers)
    assert sum(op.rows[0].table != op.rows[1].table for op in transfers) > len(transfers) / 2



def test_the_runner_records_the_physical_ids_each_ddl_removed_with_its_finished_ts(tidb):
    runner = WorkloadRunner(tidb, workload_preset("mixed"), seed=8, database="nemesis")
    tidb.create_database("shop")
    tidb.create_table("shop", "m", [("id", "bigint", "pk")],
                      partition={"type": "range", "column": "id", "bounds": [("p0", 10), ("p1", 20)]})
    tidb.create_table("shop", "t", [("id", "bigint", "pk")])
    p0, p1 = tidb.table_info("shop", "m").physical_ids()
    t = tidb.table_info("shop", "t").id
    before = tidb.cluster.tso.next()
    runner._execute(DdlOp("drop_partition", {"db": "shop", "table": "m", "name": "p1"}))
    runner._execute(DdlOp("add_column", {"db": "shop", "table": "m", "column": ("c", "int")}))
    runner._execute(DdlOp("truncate_table", {"db": "shop", "name": "t"}))
    assert runner.counters.errors == 0, runner.counters.last_error
    (*m, dropped, dropped_at), (*t_name, truncated, truncated_at) = runner.removed_ids
    assert (m, t_name) == (["shop", "m"], ["shop", "t"])
    assert (dropped, truncated) == (p1, t) and 0 < dropped_at < truncated_at
    assert tidb.table_info_at("shop", "m", before).physical_ids() == [p0, p1]
    assert tidb.table_info_at("shop", "m", dropped_at).physical_ids() == [p0]
