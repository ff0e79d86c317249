"""The DAG files import cleanly (no DB needed) and have the shape the issue asks for."""

from __future__ import annotations

import os

import pytest
from airflow_test_env import REPO, write_changefeed

from tidelake.orchestration.job_spec import SyncpointJob, to_json


@pytest.fixture
def bag(tmp_path, monkeypatch):
    from airflow.models import DagBag

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
    assert dag.get_task("succeeded").upstream_task_ids == {"merge"}  # the leaf that fails a failed run
    assert (merge.partial_kwargs["job"], merge.partial_kwargs["conn_id"]) == ("merge", "spark_default")
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


def dag_file(folder, config, **arguments) -> str:
    """A user's DAG file calling the factory with `arguments`."""
    path = folder / "user_dags.py"
    keywords = "".join(f", {name}={value!r}" for name, value in arguments.items())
    path.write_text("from tidelake.orchestration.airflow.dag_factory import changefeed_dags\n\n"
                    f"changefeed_dags({config.stem!r}, config_path={str(config)!r}{keywords})\n")
    return str(path)


def test_schedules_and_run_length_are_factory_arguments(tmp_path, monkeypatch):
    from airflow.models import DagBag
    from airflow.sdk import CronDataIntervalTimetable, DeltaDataIntervalTimetable

    monkeypatch.delenv("TIDELAKE_CONFIG", raising=False)
    config = write_changefeed(tmp_path)
    bag = DagBag(dag_folder=dag_file(tmp_path, config, merge_schedule="15m", maintenance_schedule="0 4 * * *",
                                     pull_run_seconds=900))
    assert bag.import_errors == {}
    merge = bag.dags["tidelake_merge__tests"]
    assert isinstance(merge.timetable, DeltaDataIntervalTimetable) and merge.timetable.delta.total_seconds() == 900
    maintenance = bag.dags["tidelake_maintenance__tests"]
    assert isinstance(maintenance.timetable, CronDataIntervalTimetable)
    assert maintenance.timetable.expression == "0 4 * * *"
    assert bag.dags["tidelake_puller__tests"].get_task("pull").partial_kwargs["max_run_seconds"] == 900
    for arguments, message in (({"merge_schedule": "every now and then"}, "merge_schedule: expected a cron"),
                               ({"pull_run_seconds": 0}, "pull_run_seconds: expected a whole number")):
        (error,) = DagBag(dag_folder=dag_file(tmp_path, config, **arguments)).import_errors.values()
        assert message in error



def test_a_syncpoint_interval_adds_the_syncpoint_after_the_merges(tmp_path, monkeypatch):
    from airflow.models import DagBag

    config = write_changefeed(tmp_path, "cuts", merge={"syncpoint_interval": "1m", "parallel_jobs": 1})
    monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
    dag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py")).dags["tidelake_merge"]
    due, syncpoint, publish = (dag.get_task(t) for t in ("syncpoint_due", "syncpoint", "publish"))
    assert due.upstream_task_ids == {"merge"}
    assert syncpoint.upstream_task_ids == {"syncpoint_due"}
    assert publish.upstream_task_ids == {"merge", "syncpoint"}
    assert dag.get_task("succeeded").upstream_task_ids == {"merge", "syncpoint"}
    assert syncpoint.application.endswith("spark_jobs/syncpoint_job.py")
    assert syncpoint.application_args == [to_json(SyncpointJob(str(config)))]
    assert dag.params["groups"] == 1
    assert syncpoint.outlets == []  # no [iceberg]: nothing published, no catalog asset


def test_iceberg_publishing_makes_the_catalog_asset_the_syncpoint_tasks_outlet(tmp_path, monkeypatch):
    from airflow.models import DagBag

    for remote in (None, {"remote": "sc://127.0.0.1:15002"}):
        config = write_changefeed(tmp_path, "cuts", merge={"syncpoint_interval": "1m"}, spark=remote,
                                  iceberg={"enabled": True, "catalog_name": "shop"})
        monkeypatch.setenv("TIDELAKE_CONFIG", str(config))
        bag = DagBag(dag_folder=str(REPO / "dags" / "tidelake_changefeeds.py"))
        assert bag.import_errors == {}
        (asset,) = bag.dags["tidelake_merge"].get_task("syncpoint").outlets
        assert asset.uri.startswith("tidelake-iceberg://localhost/") and asset.uri.endswith("catalog.db/shop")


def test_one_shape_whichever_spark_the_connections_name(tmp_path, monkeypatch):
    """The Spark tasks are TidelakeSparkOperator tasks on the factory's connection ids, whatever
    `[spark] remote` or SPARK_REMOTE say (those are the `tidelake` commands'): the connection's type
    chooses spark-submit or Spark Connect when the task runs."""
    from airflow.models import DagBag

    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    monkeypatch.setenv("SPARK_REMOTE", "sc://127.0.0.1:15002")
    config = write_changefeed(tmp_path, "warm", merge={"syncpoint_interval": "1m"},
                              spark={"remote": "sc://127.0.0.1:15002"})
    bag = DagBag(dag_folder=dag_file(tmp_path, config, spark_conn_id="spark_warm",
                                     bootstrap_spark_conn_id="spark_cluster"))
    assert bag.import_errors == {}
    merge_dag = bag.dags["tidelake_merge__warm"]
    merge, syncpoint = merge_dag.get_task("merge"), merge_dag.get_task("syncpoint")
    maintenance = bag.dags["tidelake_maintenance__warm"].get_task("maintenance")
    bootstrap = bag.dags["tidelake_bootstrap__warm"].get_task("bootstrap")
    assert merge.operator_class is TidelakeSparkOperator and bootstrap.operator_class is TidelakeSparkOperator
    assert isinstance(syncpoint, TidelakeSparkOperator) and isinstance(maintenance, TidelakeSparkOperator)
    assert merge.partial_kwargs["conn_id"] == syncpoint._conn_id == maintenance._conn_id == "spark_warm"
    assert bootstrap.partial_kwargs["conn_id"] == "spark_cluster"
    assert merge_dag.get_task("publish").upstream_task_ids == {"merge", "syncpoint"}


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
