"""[lake].aws_conn_id: an Airflow `aws` connection (here an AIRFLOW_CONN_* variable, as Airflow resolves
any) gives the lake's endpoint, region and keys to the puller task and the Spark tasks as their AWS
environment, read with the amazon provider's field names; bad input is one line naming the
connection id and the field; the secret is masked and reaches no spark-submit argument."""

from __future__ import annotations

import json
import logging
import os

import pytest

from tidelake.config import LakeConfig
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.orchestration.aws_connection import aws_lake_settings

SECRET = "tidelake-test-aws-secret-5150"
TOKEN = "tidelake-test-aws-token-8086"
CONN = {"conn_type": "aws", "login": "AKIATIDELAKE", "password": SECRET,
        "extra": {"region_name": "eu-west-1", "endpoint_url": "http://s3.example:9000"}}
WORKER_ENV = {"AWS_ACCESS_KEY_ID": "worker-key", "AWS_SECRET_ACCESS_KEY": "worker-secret",
              "AWS_SESSION_TOKEN": "worker-token", "AWS_ENDPOINT_URL_S3": "http://wrong:1",
              "AWS_DEFAULT_REGION": "us-east-2"}


def define(monkeypatch, conn_id: str, fields: dict) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def settings(extra=None, login="AK", password="SK", conn_type="aws", storage_options=None):
    return aws_lake_settings("lake_s3", conn_type, login, password, extra or {}, storage_options or {})


def test_fields_as_the_amazon_provider_names_them():
    got = settings({"aws_session_token": TOKEN, "region_name": "eu-west-1", "endpoint_url": "http://global:1",
                    "service_config": {"s3": {"endpoint_url": "https://s3.local:9000"}}})
    assert got.values == {"access_key_id": "AK", "secret_access_key": "SK", "session_token": TOKEN,
                          "region": "eu-west-1", "endpoint": "https://s3.local:9000"}
    from_extras = settings({"aws_access_key_id": "AK2", "aws_secret_access_key": "SK2"}, login=None, password=None)
    assert from_extras.values == {"access_key_id": "AK2", "secret_access_key": "SK2"}
    assert settings({"region_name": "us-west-2"}, login=None, password=None).values == {"region": "us-west-2"}
    assert SECRET not in repr(settings(password=SECRET)) and SECRET not in json.dumps(settings(password=SECRET).summary())


@pytest.mark.parametrize("kwargs, message", [
    ({"conn_type": "spark"}, "aws connection 'lake_s3': conn_type: is 'spark', expected 'aws'"),
    ({"password": None}, "aws connection 'lake_s3': password: the access key id (login) and secret"),
    ({"login": None}, "aws connection 'lake_s3': login: the access key id (login) and secret"),
    ({"extra": {"role_arn": "arn:aws:iam::1:role/x"}}, "aws connection 'lake_s3': role_arn: not supported"),
    ({"extra": {"endpoint_url": "s3.local:9000"}}, "aws connection 'lake_s3': endpoint_url: expected an http"),
    ({"extra": {"region_name": 7}}, "aws connection 'lake_s3': region_name: expected a string, got int"),
    ({"storage_options": {"AWS_ENDPOINT_URL": "http://x:1"}, "extra": {"endpoint_url": "http://y:1"}},
     "aws connection 'lake_s3': [lake.storage_options] also sets the endpoint"),
])
def test_bad_fields_are_one_line_naming_the_connection_and_field(kwargs, message):
    with pytest.raises(InputError) as err:
        settings(**kwargs)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_the_lake_reads_the_connection_inside_the_block_and_the_worker_env_after(tmp_path, monkeypatch, caplog,
                                                                                capsys):
    from airflow.sdk._shared.secrets_masker import redact

    from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection

    define(monkeypatch, "lake_s3", CONN)
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    lake = LakeConfig(root="s3://bucket/lake", aws_conn_id="lake_s3")
    caplog.set_level(logging.INFO)
    with lake_connection(lake):
        options = LakeLayout.from_config(lake).storage_options
        assert options["AWS_ACCESS_KEY_ID"] == "AKIATIDELAKE" and options["AWS_SECRET_ACCESS_KEY"] == SECRET
        assert options["AWS_ENDPOINT_URL"] == "http://s3.example:9000" and options["AWS_REGION"] == "eu-west-1"
        assert "AWS_SESSION_TOKEN" not in options and "AWS_SESSION_TOKEN" not in os.environ  # not the worker's
        assert "AWS_DEFAULT_REGION" not in os.environ and "AWS_ENDPOINT_URL_S3" not in os.environ
    assert {name: os.environ.get(name) for name in WORKER_ENV} == WORKER_ENV
    logged = caplog.text + capsys.readouterr().out  # Airflow's structlog writes to stdout
    assert "eu-west-1" in logged and SECRET not in logged
    assert redact(f"key {SECRET}") == "key ***"


def test_a_missing_connection_fails_the_spark_task_in_one_line(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    config = write_config(tmp_path / "tests.toml", changefeed_document(
        "tests", ["127.0.0.1:1"], "s3://bucket/lake", lake={"aws_conn_id": "nowhere_s3"}))
    operator = TidelakeSparkOperator(task_id="merge", config_path=str(config), job="merge", application_args=["{}"])
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"}))
    with pytest.raises(AirflowFailException) as err:
        operator.execute(context={})
    assert str(err.value).startswith("aws connection 'nowhere_s3': not defined") and "\n" not in str(err.value)


def test_spark_submit_gets_the_connection_in_its_environment_only(tmp_path, monkeypatch):
    """The submit runs with the connection's AWS variables (spark-submit inherits them); its
    command line, built from the DAG's conf, holds no key or secret."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator

    define(monkeypatch, "lake_s3", CONN)
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"}))
    for name in WORKER_ENV:
        monkeypatch.delenv(name, raising=False)
    config = write_config(tmp_path / "tests.toml", changefeed_document(
        "tests", ["127.0.0.1:1"], "s3://bucket/lake", lake={"aws_conn_id": "lake_s3"}))
    operator = TidelakeSparkOperator(task_id="merge", config_path=str(config), job="merge", name="m",
                                     application_args=["{}"])
    seen = {}

    def submit(self, context):
        seen["env"] = {name: os.environ.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                               "AWS_ENDPOINT_URL", "AWS_REGION")}
        hook = SparkSubmitHook(conn_id="spark_default", conf=self.conf, application_args=self.application_args,
                               packages=self.packages, env_vars=self.env_vars)
        seen["command"] = " ".join(hook._build_spark_submit_command(self.application))

    monkeypatch.setattr(SparkSubmitOperator, "execute", submit)
    operator.execute(context={})
    assert seen["env"] == {"AWS_ACCESS_KEY_ID": "AKIATIDELAKE", "AWS_SECRET_ACCESS_KEY": SECRET,
                           "AWS_ENDPOINT_URL": "http://s3.example:9000", "AWS_REGION": "eu-west-1"}
    assert "AKIATIDELAKE" not in seen["command"] and SECRET not in seen["command"]
    assert "spark.hadoop.fs.s3a.endpoint=http://s3.example:9000" in seen["command"]  # from the connection
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") is None  # restored after the task


def test_a_wrong_connection_fails_the_puller_task_in_one_line(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from tidelake.orchestration.airflow.puller_operator import PullerOperator

    define(monkeypatch, "lake_s3", {**CONN, "password": None})
    config = write_config(tmp_path / "tests.toml", changefeed_document(
        "tests", ["127.0.0.1:1"], "s3://bucket/lake", lake={"aws_conn_id": "lake_s3"}))
    operator = PullerOperator(task_id="pull", config_path=str(config), shard="0/1", max_run_seconds=60)
    with pytest.raises(AirflowFailException) as err:
        operator.execute(context={})
    assert str(err.value) == ("aws connection 'lake_s3': password: the access key id (login) and secret "
                              "(password) go together")
