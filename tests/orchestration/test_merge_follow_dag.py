"""The merge follower as an Airflow job ([merge] follow = true): the factory builds tidelake_merge_follow
(@continuous, one Spark task running spark_jobs/follow_job.py) only when asked; the follow job spec
round-trips and refuses a bad run length; the job runs the follower for its run length, merges, and
returns with its lease released. No Spark: the one-table lake's windows are written by delta-rs."""

from __future__ import annotations

import time

import pytest
from airflow_test_env import write_changefeed
from merge.lake_fixtures import FedLake, sorted_rows
from deltalake import DeltaTable

from tidelake.config import load_config
from tidelake.errors import InputError
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.lease import live_holder, merge_follower_lease
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.orchestration.job_entry import run_job
from tidelake.orchestration.job_spec import FollowJob, from_json, to_json


def test_the_factory_builds_the_follower_dag_only_when_the_config_asks(tmp_path, monkeypatch):
    from tidelake.orchestration.airflow.dag_factory import changefeed_dags

    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for name in ("off", "on"):
        (tmp_path / name).mkdir()
    off = changefeed_dags("tests", config_path=str(write_changefeed(tmp_path / "off")))
    assert "tidelake_merge_follow__tests" not in off
    on = changefeed_dags("tests", config_path=str(write_changefeed(tmp_path / "on", merge={"follow": True})))
    dag = on["tidelake_merge_follow__tests"]
    assert type(dag.timetable).__name__ == "ContinuousTimetable" and dag.max_active_runs == 1
    (task,) = dag.tasks
    assert task.task_id == "follow" and task.job == "follow"
    spec = from_json(task.application_args[0], "follow")
    assert isinstance(spec, FollowJob) and spec.run_seconds == 3600.0
    # a wedged follower is killed, so its lease lapses and the scheduled runs merge again
    assert task.execution_timeout.total_seconds() == spec.run_seconds + 600


@pytest.mark.parametrize("bad", ["0", "-1", '"1h"', "true"])
def test_a_follow_spec_with_a_bad_run_length_is_refused_whole(bad):
    text = to_json(FollowJob("cf.toml", 60.0)).replace('"run_seconds": 60.0', f'"run_seconds": {bad}')
    with pytest.raises(InputError, match="follow job spec: field 'run_seconds' must be"):
        from_json(text, "follow")


def test_the_follow_job_merges_for_its_run_length_and_releases_its_lease(tmp_path):
    lake = FedLake(str(tmp_path / "lake"))
    try:
        lake.ddl(lake.up.create_schema("shop"))
        lake.ddl(lake.up.create_table("shop", "orders", [("id", "bigint", "pk"), ("note", "varchar(20)")]))
        with lake.txn() as t:
            for i in range(1, 6):
                t.put("shop", "orders", {"id": i, "note": f"n{i}"})
        upper = lake.resolve()
        config = write_changefeed(tmp_path)  # its lake is tmp_path/lake
        started = time.monotonic()
        run_job(FollowJob(str(config), 1.0), load_config(config), None)
        assert 1.0 <= time.monotonic() - started < 10
        path = ReplicaCatalog(lake.layout).find("shop", "orders").path
        assert read_checkpoint(path) == upper
        assert sorted_rows(DeltaTable(path).to_pyarrow_table().to_pylist()) == lake.expected_rows("shop", "orders", upper)
        assert live_holder(lake.layout, merge_follower_lease()) is None
    finally:
        lake.close()
