"""Every secret a deployment keeps in a connection (the lake's AWS secret and session token, the Spark
Connect token, the PD client key) stays out of the DAGs Airflow serializes (what rendered templates
are rendered from), out of what the tasks return (XCom) and out of tidelake's own log lines, and is
registered with Airflow's masker, which task logs pass through: grepped for here, with the tasks run
as Airflow runs them (their execute) on fakes of the puller and of the Spark job."""

from __future__ import annotations

import json
import logging
import os

import pytest
from airflow_test_env import write_changefeed

KEY_BODY = "dGlkZWxha2Utc2VjcmV0LXBkLWtleS1ib2R5LTk5"
SECRETS = {
    "aws secret": "tidelake-aws-secret-31337",
    "aws session token": "tidelake-aws-token-27182",
    "spark connect token": "tidelake-connect-token-16180",
    "pd client key": KEY_BODY,
}
CERT = "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n"


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    """Connections holding every secret, and a changefeed config naming them."""
    connections = {
        "lake_s3": {"conn_type": "aws", "login": "AKIATIDELAKE", "password": SECRETS["aws secret"],
                    "extra": {"aws_session_token": SECRETS["aws session token"], "region_name": "eu-west-1",
                              "endpoint_url": "http://s3.example:9000"}},
        "spark_warm": {"conn_type": "spark_connect", "host": "sc://warm.example", "port": 15002,
                       "password": SECRETS["spark connect token"]},
        "pd_prod": {"conn_type": "tidb_pd", "host": "pd-0.pd", "port": 2379,
                    "extra": {"tls_ca": CERT, "tls_cert": CERT,
                              "tls_private_key": f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----\n"}},
    }
    for conn_id, fields in connections.items():
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
    path = write_changefeed(tmp_path, "vault", merge={"syncpoint_interval": "1m"})
    text = path.read_text().replace('pd = ["127.0.0.1:1"]', 'connection = "pd_prod"')
    text = text.replace("[lake]\n", '[lake]\naws_conn_id = "lake_s3"\n')
    path.write_text(text.replace(f'root = "{tmp_path / "lake"}"', 'root = "s3://bucket/vault"'))
    return path


def assert_no_secret(text: str, where: str) -> None:
    for name, secret in SECRETS.items():
        assert secret not in text, f"the {name} is in {where}"


def test_the_serialized_dags_hold_no_secret(deployment, monkeypatch):
    """The parse reads the lake with its connection (the merge DAG's table list; the read itself
    is a fake here), so the secret is in the parsing process, and still in no serialized DAG."""
    from airflow.serialization.serialized_objects import DagSerialization

    from tidelake.lake.layout import LakeLayout
    from tidelake.orchestration import merge_dag
    from tidelake.orchestration.airflow.dag_factory import changefeed_dags

    read = []
    monkeypatch.setattr(merge_dag, "table_choices",
                        lambda config: read.append(LakeLayout.from_config(config.lake).storage_options) or ["a.t"])
    dags = changefeed_dags("vault", config_path=str(deployment), spark_conn_id="spark_warm")
    assert [options["AWS_SECRET_ACCESS_KEY"] for options in read] == [SECRETS["aws secret"]]
    assert set(dags) == {f"tidelake_{k}__vault" for k in ("puller", "merge", "maintenance", "bootstrap")}
    for dag_id, dag in dags.items():
        assert_no_secret(json.dumps(DagSerialization.to_dict(dag), default=str), f"the serialized {dag_id}")


def test_the_tasks_return_no_secret_log_none_and_register_each_with_the_masker(deployment, monkeypatch, capsys,
                                                                              caplog):
    """The puller task (fake runner) and a Spark task on Spark Connect (fake job) run with every
    connection resolved; the fakes log what a job sees (its AWS variables, the Connect URL)."""
    import tidelake.capture.changefeed.puller_runner as runner_module
    import tidelake.orchestration.job_entry as job_entry
    from airflow.sdk._shared.secrets_masker import redact

    from tidelake.capture.changefeed.puller_runner import RunSummary
    from tidelake.orchestration.airflow.puller_operator import PullerOperator
    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
    from tidelake.orchestration.job_spec import MaintenanceJob, to_json

    seen = {}

    class FakeRunner:
        def __init__(self, config, shard, options, progress=None):
            seen["upstream"] = config.upstream
            seen["puller env"] = os.environ.get("AWS_SECRET_ACCESS_KEY")

        def run(self):
            return RunSummary(start_ts=1, rows=5, jobs=1, table_resolved={10: 7}, ddl_resolved=9, bytes=2048)

        def stop(self):
            pass

    def fake_job(spec: str, url: str) -> None:
        seen["connect url"] = url
        seen["job env"] = os.environ.get("AWS_SESSION_TOKEN")

    monkeypatch.setattr(runner_module, "PullerRunner", FakeRunner)
    monkeypatch.setattr(job_entry, "run_on_warm_spark", fake_job)
    pulled = PullerOperator(task_id="pull", config_path=str(deployment), shard="0/1", max_run_seconds=60).execute({})
    spark = TidelakeSparkOperator(task_id="maintenance", config_path=str(deployment), job="maintenance",
                                  conn_id="spark_warm", application_args=[to_json(MaintenanceJob(str(deployment)))])
    returned = spark.execute({})
    # the tasks did get the secrets, where they run
    assert seen["puller env"] == SECRETS["aws secret"] and seen["job env"] == SECRETS["aws session token"]
    assert SECRETS["spark connect token"] in seen["connect url"] and seen["upstream"].tls.key
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") != SECRETS["aws secret"]  # and only while they ran
    assert_no_secret(json.dumps([pulled, returned]), "the tasks' XCom")
    assert "lake store from the aws connection" in caplog.text  # the tasks logged what they used
    assert_no_secret(capsys.readouterr().out + caplog.text, "tidelake's log lines")
    for name, secret in SECRETS.items():
        assert redact(f"a job quoting {secret}") == "a job quoting ***", f"the {name} is not masked in task logs"


def test_the_bootstrap_spark_submit_gets_the_pd_key_as_a_file_only(deployment, monkeypatch, capsys, caplog):
    """The bootstrap's spark-submit (the provider's, its command line built as it would run) gets
    [upstream].connection as TLS file paths in its inherited environment: the key is in that file
    for the job, in no argument, Spark conf, environment variable, XCom or log line."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from tidelake.orchestration import job_entry
    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
    from tidelake.orchestration.job_spec import BootstrapJob, from_json, to_json

    seen = {}

    def submit(self, context):
        hook = SparkSubmitHook(conn_id=self._conn_id, conf=self.conf, application_args=self.application_args,
                               packages=self.packages, env_vars=self.env_vars, py_files=self.py_files)
        seen["command"] = " ".join(hook._build_spark_submit_command(self.application))
        # what tidelake adds to it: this test's AIRFLOW_CONN_* variables hold every secret
        seen["environment"] = json.dumps({k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")})
        with open(job_entry._config(from_json(self.application_args[0])).upstream.tls.key) as key:
            seen["key file"] = key.read()  # what the driver, the submit's child, opens

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    caplog.set_level(logging.INFO)
    task = TidelakeSparkOperator(task_id="bootstrap", config_path=str(deployment), job="bootstrap",
                                 application_args=[to_json(BootstrapJob(str(deployment)))])
    returned = task.execute({})
    assert KEY_BODY in seen["key file"]  # the job did get the key, where it runs
    assert "PD connection" in caplog.text  # the task logged what it used
    assert_no_secret(seen["command"], "the spark-submit command line")
    assert KEY_BODY not in seen["environment"] and "pd-0.pd:2379" in seen["environment"], \
        "the pd client key is in the submit's environment"
    assert_no_secret(json.dumps(returned) + json.dumps([task.conf, task.env_vars, task.application_args]),
                     "the task's XCom and submit arguments")
    assert_no_secret(capsys.readouterr().out + caplog.text, "tidelake's log lines")
