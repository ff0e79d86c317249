"""TidelakeSparkOperator chooses at task time from its connection's type alone: spark-submit with the
`spark` connection's tidelake extras, or the job in the task over Spark Connect for a `spark_connect`
connection (its URL, token included, built by the Spark provider's SparkConnectHook)."""

from __future__ import annotations

import json

import pytest
from airflow_test_env import write_changefeed

from tidelake.orchestration.job_spec import MergeJob, to_json

TOKEN = "tidelake-test-connect-token-4242"


@pytest.fixture
def submitted(monkeypatch):
    """What SparkSubmitOperator.execute was called with (nothing is submitted)."""
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    seen = []
    monkeypatch.setattr(SparkSubmitOperator, "execute", lambda self, context: seen.append(self))
    return seen


@pytest.fixture
def connected(monkeypatch):
    """The (spec, url) run_on_warm_spark was called with (no Spark is started)."""
    import tidelake.orchestration.job_entry as job_entry

    seen = []
    monkeypatch.setattr(job_entry, "run_on_warm_spark", lambda spec, url: seen.append((spec, url)))
    return seen


def operator(tmp_path, job="merge", conn_id="spark_test"):
    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    config = write_changefeed(tmp_path)
    return TidelakeSparkOperator(task_id=job, config_path=str(config), job=job, conn_id=conn_id, name=f"tidelake {job}",
                                 application_args=[to_json(MergeJob(str(config)))])


def test_a_spark_connection_submits_with_its_extras(tmp_path, monkeypatch, submitted, connected):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({
        "conn_type": "spark", "host": "spark://m:7077",
        "extra": {"spark_conf": {"spark.cores.max": "2"}, "spark_python": "/usr/bin/python3"}}))
    task = operator(tmp_path)
    task.execute(context={})
    assert submitted == [task] and connected == []
    assert task.application.endswith("spark_jobs/merge_job.py")
    assert task.conf["spark.cores.max"] == "2" and task.conf["spark.pyspark.python"] == "/usr/bin/python3"
    assert task.env_vars["PYSPARK_PYTHON"] == "/usr/bin/python3"
    assert "io.delta:delta-spark" in task.packages and "tidelake-" in task.py_files


def test_a_spark_connect_connection_runs_the_job_in_the_task(tmp_path, monkeypatch, submitted, connected, capsys):
    from airflow.sdk._shared.secrets_masker import redact

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({
        "conn_type": "spark_connect", "host": "sc://warm.example", "port": 15002, "password": TOKEN}))
    task = operator(tmp_path)
    task.execute(context={})
    assert submitted == []
    assert connected == [(task.application_args[0], f"sc://warm.example:15002/;token={TOKEN}")]
    assert redact(f"url {connected[0][1]}") == "url sc://warm.example:15002/;token=***"


def test_the_bootstrap_on_spark_connect_is_one_line(tmp_path, monkeypatch, submitted, connected):
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark_connect", "host": "sc://warm"}))
    with pytest.raises(AirflowFailException) as err:
        operator(tmp_path, job="bootstrap").execute(context={})
    assert str(err.value) == ("spark_connect connection 'spark_test': the bootstrap job needs classic Spark (RDDs); "
                              "give it a `spark` connection")
    assert submitted == connected == []


def test_a_bad_extra_fails_the_task_in_one_line(tmp_path, monkeypatch, submitted):
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_TEST", json.dumps({"conn_type": "spark", "host": "local[1]",
                                                              "extra": {"spark_conf": "{oops"}}))
    with pytest.raises(AirflowFailException) as err:
        operator(tmp_path).execute(context={})
    assert str(err.value).startswith("spark connection 'spark_test': spark_conf: not a JSON object")
    assert submitted == []
