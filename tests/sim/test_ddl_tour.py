"""The DDL tour runs every DDL kind the merge supports, each followed by DML."""

from __future__ import annotations

import pytest

from tidelake.codec.ddl_job import ActionType
from tidelake.sim.cluster import SimCluster
from tidelake.sim.ddl_tour import TOUR_DB, TOUR_SCRATCH_DB, DdlTour
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
    assert set(tidb.physical_ids(TableFilter.parse([f"{TOUR_DB}.*"]))) >= set(ledger.physical_ids())
