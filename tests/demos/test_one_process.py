"""`tidelake demo`: its orchestration pieces on a live simulator (fast), and the full run (slow)."""

from __future__ import annotations

import pytest

from tidelake.codec.ddl_job import ActionType
from tidelake.config import load_config
from tidelake.demo import (
    TOUR_DB,
    TOUR_SCRATCH_DB,
    WORKLOAD_DB,
    DdlTour,
    DemoOptions,
    LightFaults,
    changefeed_toml,
    replicated_physical_ids,
    run_demo,
)
from tidelake.sim.cluster import SimCluster
from tidelake.table_filter import TableFilter

# Every DDL kind the merge supports; RENAME COLUMN is a MODIFY_COLUMN job in TiDB (ddl_job.py).
SUPPORTED = {
    ActionType.CREATE_SCHEMA, ActionType.DROP_SCHEMA, ActionType.CREATE_TABLE, ActionType.DROP_TABLE,
    ActionType.TRUNCATE_TABLE, ActionType.RENAME_TABLE, ActionType.ADD_COLUMN, ActionType.DROP_COLUMN,
    ActionType.MODIFY_COLUMN, ActionType.ADD_INDEX, ActionType.DROP_INDEX,
    ActionType.ADD_TABLE_PARTITION, ActionType.DROP_TABLE_PARTITION, ActionType.TRUNCATE_TABLE_PARTITION,
}


@pytest.fixture
def cluster():
    with SimCluster(n_stores=3, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                    server_workers=8) as sim:
        yield sim


def test_changefeed_toml_is_a_valid_config_for_the_demo_databases(tmp_path):
    path = tmp_path / "changefeed.toml"
    path.write_text(changefeed_toml("127.0.0.1:2379", tmp_path / "lake"))
    config = load_config(path)
    assert config.upstream.pd == ("127.0.0.1:2379",) and config.lake.root == str(tmp_path / "lake")
    rules = config.filter.table_filter()
    assert isinstance(rules, TableFilter)
    for db in (WORKLOAD_DB, TOUR_DB, TOUR_SCRATCH_DB):
        assert rules.should_replicate_table(db, "anything")
    assert not rules.should_replicate_table("other", "t")


def test_ddl_tour_runs_every_supported_ddl_kind_with_dml_after_each(cluster):
    from tidelake.sim.tidb.session import SimTiDB

    tidb = SimTiDB(cluster)
    tour = DdlTour(tidb, seed=5)
    names = []
    while not tour.done:
        names.append(tour.step())
    assert tour.step() is None and names == tour.kinds == tour.ran
    actions = [ActionType(job.type) for job in tour.jobs]
    assert set(actions) == SUPPORTED and actions.count(ActionType.MODIFY_COLUMN) == 2  # modify + rename
    assert all(job.finished_ts > 0 for job in tour.jobs)
    tables = {(db, name) for db, name, _ in tidb.tables() if db in (TOUR_DB, TOUR_SCRATCH_DB)}
    assert tables == {(TOUR_DB, "goods"), (TOUR_DB, "ledger")}  # renamed, partitioned; scratch db dropped
    goods = tidb.select_all(TOUR_DB, "goods")
    assert goods and {"id", "name", "qty"} == set(goods[0])  # truncated, then refilled by the DML step
    ledger = tidb.table_info(TOUR_DB, "ledger")
    assert [p.name for p in ledger.partition.definitions] == ["p0", "p2"]
    assert len(tidb.select_all(TOUR_DB, "ledger")) > 0
    assert set(replicated_physical_ids(tidb)) >= set(ledger.physical_ids())


def test_light_faults_inject_each_kind(cluster):
    from tidelake.codec.keys import record_key, to_region_key
    from tidelake.sim.tidb.session import SimTiDB

    tidb = SimTiDB(cluster)
    tidb.create_database(WORKLOAD_DB)
    tidb.create_table(WORKLOAD_DB, "t", [("id", "bigint")], primary_key=["id"])
    ids = replicated_physical_ids(tidb)
    faults = LightFaults(cluster, lambda: ids, seed=1)
    regions = len(cluster.regions.all())
    assert faults.inject("split") and len(cluster.regions.all()) == regions + 1
    region = cluster.regions.locate(to_region_key(record_key(ids[0], 1000)))
    leaders = {r.id: r.leader_store_id for r in cluster.regions.all()}
    assert faults.inject("leader transfer")
    assert any(leaders.get(r.id) not in (None, r.leader_store_id) for r in cluster.regions.all()), region
    assert faults.inject("busy burst")
    assert any(cluster.faults.busy_remaining_ms(s) > 0 for s in cluster.store_addresses)
    resets = []
    cluster.faults.on_reset_streams(resets.append)
    assert faults.inject("stream reset") and len(resets) == 1
    assert not LightFaults(cluster, lambda: [], seed=1).inject("split")


def test_demo_rejects_a_used_workdir_and_a_bad_duration(tmp_path):
    from rich.console import Console

    from tidelake.errors import InputError

    with pytest.raises(InputError, match="duration"):
        run_demo(DemoOptions(tmp_path, duration_s=0), Console())
    (tmp_path / "lake").mkdir()
    with pytest.raises(InputError, match="already exists"):
        run_demo(DemoOptions(tmp_path, duration_s=5, keep=True), Console())
    assert (tmp_path / "lake").exists()


@pytest.mark.slow
@pytest.mark.spark
def test_full_demo_verifies_every_replica(spark, tmp_path):
    from rich.console import Console

    from tidelake.verify import MATCH

    result = run_demo(DemoOptions(tmp_path / "demo", duration_s=20, seed=2, keep=True), Console())
    assert result.ok, [(v.table, v.status, v.note) for v in result.verify.tables]
    assert set(result.ddl_kinds) == set(DdlTour(None, 0).kinds)
    assert all(n > 0 for n in result.faults.values()), result.faults
    matched = {v.table for v in result.verify.tables if v.status == MATCH}
    assert {f"{TOUR_DB}.goods", f"{TOUR_DB}.ledger", f"{WORKLOAD_DB}.orders"} <= matched
    assert all(v.checkpoint == result.final_ts for v in result.verify.tables if v.status == MATCH)
    assert result.merge_cycles >= 2
