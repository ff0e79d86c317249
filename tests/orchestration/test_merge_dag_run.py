"""tidelake_merge end to end with `dag.test`: a lake fed through the real Lander, the plan task,
spark-submit of spark_jobs/merge_job.py on local Spark, and asset events with the checkpoint
(the replica's contents are the merge job's tests' concern).

One run has a data interval (as a scheduled or backfill run): the replica must stop at the TSO
just before the interval end although later changes are resolved. A run with a bad param must
fail in its plan task, before any Spark job.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from airflow_test_env import REPO, write_changefeed
from merge.lake_fixtures import FedLake

from tidelake import tso
from tidelake.lake.checkpoint import read_checkpoint, replica_version
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.orchestration.assets import replica_asset_uri

# spark-submit starts a JVM per merge group: minutes on a busy 2-core machine.
pytestmark = [pytest.mark.airflow, pytest.mark.spark, pytest.mark.slow]

INTERVAL_END = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def fed_lake(tmp_path, monkeypatch):
    lake = FedLake(str(tmp_path / "lake"))
    lake.up.ts = tso.from_datetime(INTERVAL_END - timedelta(minutes=10))
    lake.ddl(lake.up.create_schema("shop"))
    lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    for i in range(1, 4):
        with lake.txn() as t:
            t.put("shop", "orders", {"id": i, "note": f"before-{i}"})
    lake.up.ts = tso.from_datetime(INTERVAL_END + timedelta(minutes=1))
    with lake.txn() as t:
        t.put("shop", "orders", {"id": 1, "note": "after the interval"})
    lake.resolve()
    lake.close()
    monkeypatch.setenv("TIDELAKE_CONFIG", str(write_changefeed(tmp_path)))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({
        "conn_type": "spark", "host": "local[2]",
        "extra": {"spark_conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}}}))
    return lake


def merge_dag():
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py"))
    assert bag.import_errors == {}
    return bag.dags["tidelake_merge"]


def task_states(run) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}


def test_interval_run_merges_up_to_the_interval_end_and_emits_the_asset_event(airflow_db, fed_lake):
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    run = merge_dag().test(logical_date=INTERVAL_END)
    assert str(run.state) == "success", task_states(run)
    cap = tso.from_datetime(run.data_interval_end) - 1
    assert run.data_interval_end <= INTERVAL_END + timedelta(minutes=1)

    history = SchemaHistory.load(fed_lake.layout)
    path = ReplicaCatalog(fed_lake.layout).get(history.find("shop", "orders")).path
    # The later change is resolved too, so only the run's cap can have stopped the replica here.
    assert read_checkpoint(path) == cap

    with create_session() as session:
        events = session.scalars(select(AssetEvent).where(AssetEvent.source_run_id == run.run_id)).all()
        assert [e.asset.uri for e in events] == [replica_asset_uri("tests", "shop.orders")]
        assert events[0].extra["checkpoint_ts"] == cap
        assert events[0].extra["delta_version"] == replica_version(path)


def test_a_bad_param_fails_the_plan_before_any_spark_job(airflow_db, fed_lake):
    run = merge_dag().test(logical_date=None, run_conf={"tables": ["shop.nope"]})
    states = task_states(run)
    assert str(run.state) == "failed"
    assert states["plan"] == "failed"
    assert states["merge"] == "upstream_failed"
