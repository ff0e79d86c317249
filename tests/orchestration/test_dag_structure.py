"""The DAG files import cleanly (no DB needed) and have the shape the issue asks for."""

from __future__ import annotations

import os

import pytest
from airflow_test_env import REPO, write_changefeed

from tidelake.orchestration.job_spec import SyncpointJob, to_json


@pytest.fixture
def bag(tmp_path, monkeypatch):
    from airflow.models import DagBag

    monkeypatch.delenv("SPARK_REMOTE", raising=False)  # a warm Spark turns the Spark jobs into Python tasks
    configs = [write_changefeed(tmp_path, "main", shards=3), write_changefeed(tmp_path, "crm")]
    monkeypatch.setenv("TIDELAKE_CONFIG", os.pathsep.join(map(str, configs)))
    return DagBag(dag_folder=str(REPO / "dags"))


def test_no_import_errors_and_one_dag_of_each_kind_per_changefeed(bag):
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == sorted(
        f"tidelake_{kind}{suffix}" for kind in ("puller", "merge", "maintenance", "bootstrap") for suffix in ("", "__crm")
    )


def test_puller_is_continuous_with_one_long_task_per_shard(bag):
    from airflow.sdk.definitions.timetables.simple import ContinuousTimetable

    dag = bag.dags["tidelake_puller"]
    assert isinstance(dag.timetable, ContinuousTimetable)
    assert dag.max_active_runs == 1
    (pull,) = dag.tasks
    assert pull.expand_input.value["shard"] == ["0/3", "1/3", "2/3"]
    assert bag.dags["tidelake_puller__crm"].tasks[0].expand_input.value["shard"] == ["0/1"]
    assert pull.partial_kwargs["config_path"].endswith("main.toml")


def test_merge_plans_then_maps_spark_jobs_then_publishes_assets(bag):
    from airflow.sdk import CronDataIntervalTimetable

    dag = bag.dags["tidelake_merge"]
    assert isinstance(dag.timetable, CronDataIntervalTimetable) and dag.timetable.expression == "*/5 * * * *"
    assert dag.max_active_runs == 1
    plan, merge, publish = (dag.get_task(t) for t in ("plan", "merge", "publish"))
    assert merge.upstream_task_ids == {"plan"}
    assert publish.upstream_task_ids == {"merge"}
    assert merge.partial_kwargs["application"].endswith("spark_jobs/merge_job.py")
    assert merge.partial_kwargs["conn_id"] == "spark_default"
    assert [o.name for o in publish.outlets] == ["tidelake-merge-main"]
    assert set(dag.params) == {"tables", "until_ts", "until_time", "rebuild", "dry_run", "groups"}


def test_maintenance_is_daily(bag):
    dag = bag.dags["tidelake_maintenance"]
    assert dag.timetable.expression == "0 3 * * *"
    assert dag.max_active_runs == 1


def test_a_missing_config_is_an_import_error_naming_the_variable(monkeypatch):
    from airflow.models import DagBag

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    errors = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).import_errors
    assert any("TIDELAKE_CONFIG is not set" in message for message in errors.values())


def test_schedule_comes_from_the_environment(tmp_path, monkeypatch):
    from airflow.models import DagBag
    from airflow.sdk import DeltaDataIntervalTimetable

    monkeypatch.setenv("TIDELAKE_CONFIG", str(write_changefeed(tmp_path)))
    monkeypatch.setenv("TIDELAKE_MERGE_SCHEDULE", "15m")
    dag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).dags["tidelake_merge"]
    assert isinstance(dag.timetable, DeltaDataIntervalTimetable)
    assert dag.timetable.delta.total_seconds() == 900
    monkeypatch.setenv("TIDELAKE_MERGE_SCHEDULE", "every now and then")
    errors = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).import_errors
    assert any("TIDELAKE_MERGE_SCHEDULE" in message for message in errors.values())



def test_a_syncpoint_interval_adds_the_syncpoint_after_the_merges(tmp_path, monkeypatch):
    from airflow.models import DagBag

    config = write_changefeed(tmp_path, "cuts", merge={"syncpoint_interval": "1m", "parallel_jobs": 1})
    monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
    dag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).dags["tidelake_merge"]
    due, syncpoint, publish = (dag.get_task(t) for t in ("syncpoint_due", "syncpoint", "publish"))
    assert due.upstream_task_ids == {"merge"}
    assert syncpoint.upstream_task_ids == {"syncpoint_due"}
    assert publish.upstream_task_ids == {"merge", "syncpoint"}
    assert syncpoint.application.endswith("spark_jobs/syncpoint_job.py")
    assert syncpoint.application_args == [to_json(SyncpointJob(str(config)))]
    assert dag.params["groups"] == 1
    assert syncpoint.outlets == []  # no [iceberg]: nothing published, no catalog asset


def test_iceberg_publishing_makes_the_catalog_asset_the_syncpoint_tasks_outlet(tmp_path, monkeypatch):
    from airflow.models import DagBag

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for remote in (None, {"remote": "sc://127.0.0.1:15002"}):
        config = write_changefeed(tmp_path, "cuts", merge={"syncpoint_interval": "1m"}, spark=remote,
                                  iceberg={"enabled": True, "catalog_name": "shop"})
        monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
        bag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py"))
        assert bag.import_errors == {}
        (asset,) = bag.dags["tidelake_merge"].get_task("syncpoint").outlets
        assert asset.uri.startswith("tidelake-iceberg://localhost/") and asset.uri.endswith("catalog.db/shop")


def test_a_warm_spark_makes_the_spark_jobs_thin_connect_clients(tmp_path, monkeypatch):
    """[spark] remote: merge, syncpoint and maintenance are Python tasks calling the server;
    without it (the bag fixture) they stay spark-submits. SPARK_REMOTE on the workers does the same."""
    from airflow.models import DagBag
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    config = write_changefeed(tmp_path, "warm", merge={"syncpoint_interval": "1m"},
                              spark={"remote": "sc://127.0.0.1:15002"})
    monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    merge_dag = bag.dags["tidelake_merge"]
    tasks = [merge_dag.get_task(t) for t in ("merge", "syncpoint")] + [bag.dags["tidelake_maintenance"].get_task("maintenance")]
    for task in tasks:
        assert not isinstance(task, SparkSubmitOperator) and task.task_type == "_PythonDecoratedOperator"
    assert merge_dag.get_task("publish").upstream_task_ids == {"merge", "syncpoint"}

    cold = write_changefeed(tmp_path, "cold")
    monkeypatch.setenv("TIDELAKE_CONFIG", str(cold))
    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    merge = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).dags["tidelake_merge"].get_task("merge")
    assert merge.task_type == "_PythonDecoratedOperator"


def test_replica_writers_on_a_filesystem_lake_stay_in_the_default_pool(bag):
    for suffix in ("", "__crm"):
        merge = bag.dags[f"tidelake_merge{suffix}"].get_task("merge")
        maintenance = bag.dags[f"tidelake_maintenance{suffix}"].get_task("maintenance")
        bootstrap = bag.dags[f"tidelake_bootstrap{suffix}"].get_task("bootstrap")
        assert "pool" not in merge.partial_kwargs and "pool" not in bootstrap.partial_kwargs
        assert maintenance.pool == "default_pool"


def test_replica_writers_of_an_s3_lake_share_one_pool_and_maintenance_takes_all_of_it():
    from tidelake.config import parse_config
    from tidelake.orchestration.writer_pool import writer_pool

    config = parse_config({"changefeed": {"id": "cf"}, "upstream": {"pd": ["127.0.0.1:2379"]},
                           "lake": {"root": "s3://bucket/lake"}, "merge": {"parallel_jobs": 3}}, "test")
    pool = writer_pool(config)
    assert (pool.name, pool.slots, pool.required) == ("tidelake_writers__cf", 3, True)
    assert pool.task_args(exclusive=False) == {"pool": "tidelake_writers__cf", "pool_slots": 1}
    assert pool.task_args(exclusive=True) == {"pool": "tidelake_writers__cf", "pool_slots": 3}

def test_run_on_new_data_adds_the_changelog_asset_and_its_watcher_to_the_schedule(tmp_path, monkeypatch):
    from airflow.models import DagBag
    from airflow.sdk import AssetOrTimeSchedule, CronDataIntervalTimetable
    from airflow.serialization.serialized_objects import DagSerialization

    from tidelake.orchestration.airflow.new_data_trigger import NewDataTrigger

    config = write_changefeed(tmp_path, "main", merge={"run_on_new_data": "30s"})
    monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    bag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py"))
    assert bag.import_errors == {}
    dag = bag.dags["tidelake_merge"]
    assert isinstance(dag.timetable, AssetOrTimeSchedule)
    assert isinstance(dag.timetable.timetable, CronDataIntervalTimetable)  # backfills keep their intervals
    asset = dag.timetable.asset_condition
    assert asset.uri == "tidelake://main/_tidelake/changelog"
    (watcher,) = asset.watchers
    assert isinstance(watcher.trigger, NewDataTrigger)
    assert watcher.trigger.serialize()[1] == {"config_path": str(config), "floor_s": 30.0, "poll_s": 5.0}
    # what the DAG processor stores and the scheduler reads back: the watcher's trigger and kwargs
    stored = DagSerialization.from_dict(DagSerialization.to_dict(dag)).timetable.asset_condition
    assert stored.uri == asset.uri
    assert [(w.name, w.trigger) for w in stored.watchers] == [(watcher.name, {
        "classpath": "tidelake.orchestration.airflow.new_data_trigger.NewDataTrigger",
        "kwargs": {"config_path": str(config), "floor_s": 30.0, "poll_s": 5.0}})]
