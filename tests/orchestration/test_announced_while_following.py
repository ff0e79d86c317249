"""While a merge follower merges, tidelake_merge's runs merge nothing, but their publish task still
announces what the follower committed since the last announcement, once: one asset event per
replica that advanced, with the checkpoint and Delta version it advanced to (read back from the
replica's own log), and none for a replica that did not move. A run whose merge job fails after
committing still announces what it committed, and fails. No Spark: the merges are delta-rs
windows run in the test's process (the merge job's operator replaced by one)."""

from __future__ import annotations

import pytest
from airflow_test_env import REPO, write_changefeed
from merge.lake_fixtures import FedLake

from tidelake.lake.checkpoint import read_checkpoint, replica_version
from tidelake.lake.lease import hold, merge_follower_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.merge_run import run_merge
from tidelake.orchestration.announced_states import announced_states
from tidelake.orchestration.assets import replica_asset_uri

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(300)]


@pytest.fixture(params=[None, "1h"], ids=["no-syncpoints", "syncpoints"])
def lake(tmp_path, monkeypatch, request):
    """A lake of two tables; with syncpoints, the runs' syncpoint task is skipped (the follower takes
    the cuts) and the publish after it must run all the same."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema("shop"))
    for table in ("orders", "items"):
        lake.ddl(lake.up.create_table("shop", table, [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    put(lake, "orders", 1)
    put(lake, "items", 1)
    lake.resolve()
    merge = None if request.param is None else {"syncpoint_interval": request.param}
    monkeypatch.setenv("TIDELAKE_CONFIG", str(write_changefeed(tmp_path, merge=merge)))
    yield lake
    lake.close()


def put(lake: FedLake, table: str, i: int) -> None:
    with lake.txn() as t:
        t.put("shop", table, {"id": i, "note": f"v{i}"})


@pytest.fixture
def merge_dag(airflow_db, lake):
    """The changefeed's merge DAG; `dag.test` stores its file's DAGs in the metadata DB, so they are
    deleted afterwards (the Replication page's tests list the deployed changefeeds)."""
    from airflow.api.common.delete_dag import delete_dag
    from airflow.exceptions import DagNotFound
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py"))
    assert bag.import_errors == {}
    yield bag.dags["tidelake_merge"]
    for dag_id in bag.dag_ids:  # the file's other DAGs (the puller's names the changefeed) too
        try:
            delete_dag(dag_id)
        except DagNotFound:
            pass


def events_of(run) -> dict[str, dict]:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        events = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == run.run_id)).all()
        return {e.asset.uri: dict(e.extra) for e in events}


def replica(lake: FedLake, table: str) -> str:
    return ReplicaCatalog(lake.layout).find("shop", table).path


def states_of(lake: FedLake) -> dict[str, tuple[int, int]]:
    """Each replica's (checkpoint, Delta version), read from its own log."""
    return {replica_asset_uri("tests", f"shop.{t}"): (read_checkpoint(replica(lake, t)), replica_version(replica(lake, t)))
            for t in ("orders", "items")}


def announced(run) -> dict[str, tuple[int, int]]:
    return {uri: (e["checkpoint_ts"], e["delta_version"]) for uri, e in events_of(run).items()}


def test_runs_beside_a_follower_announce_what_it_merged_once(merge_dag, lake):
    dag = merge_dag
    with hold(lake.layout, {"f": (merge_follower_lease(), "the merge follower")}):
        first = dag.test(logical_date=None)  # nothing merged yet: its baseline is recorded
        assert str(first.state) == "success"
        assert events_of(first) == {}

        run_merge(None, lake.layout)  # the follower's pass: both replicas created and merged
        second = dag.test(logical_date=None)
        assert str(second.state) == "success"
        merged = states_of(lake)
        assert announced(second) == merged

        assert events_of(dag.test(logical_date=None)) == {}  # nothing moved since: nothing announced

        put(lake, "orders", 2)
        lake.resolve()
        run_merge(None, lake.layout)
        moved = {uri: state for uri, state in states_of(lake).items() if state != merged[uri]}
        assert replica_asset_uri("tests", "shop.orders") in moved
        assert announced(dag.test(logical_date=None)) == moved
    path = replica(lake, "orders")
    recorded = announced_states(lake.layout, "tests")
    assert (recorded["shop.orders"].checkpoint_ts, recorded["shop.orders"].delta_version) == (
        read_checkpoint(path), replica_version(path))


def test_a_run_whose_merge_failed_announces_what_it_committed_and_fails(merge_dag, lake, monkeypatch):
    from airflow.exceptions import AirflowException

    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    def merges_then_fails(self, context):
        run_merge(None, lake.layout)
        raise AirflowException("the Spark job failed after its commits")

    monkeypatch.setattr(TidelakeSparkOperator, "execute", merges_then_fails)
    monkeypatch.setitem(merge_dag.get_task("merge").partial_kwargs, "retries", 0)  # no minute-long retry waits
    run = merge_dag.test(logical_date=None)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert str(run.state) == "failed"
    assert (states["merge"], states["publish"], states["succeeded"]) == ("failed", "success", "upstream_failed")
    assert announced(run) == states_of(lake)
