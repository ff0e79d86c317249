"""Spark's s3a confs come from the same storage options delta-rs uses."""

from __future__ import annotations

import os

import pytest

from tidelake.lake.layout import LakeLayout
from tidelake.lake.object_store import lake_storage_options
from tidelake.spark.s3a import hadoop_aws_package, lake_packages, s3a_confs, s3a_credential_env
from tidelake.spark.spark_session import get_session


def _layout(root: str, options: dict[str, str]) -> LakeLayout:
    return LakeLayout(root, lake_storage_options(root, options, environ={}))


def test_a_loopback_endpoint_is_path_style_plain_http_with_static_keys():
    layout = _layout("s3://lake/prod", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "us-east-1",
                                        "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"})
    assert s3a_confs(layout) == {
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
        "spark.hadoop.fs.s3a.access.key": "k",
        "spark.hadoop.fs.s3a.secret.key": "s",
        "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }
    assert lake_packages(layout) == [hadoop_aws_package()]


def test_session_credentials_and_virtual_hosted_style():
    confs = s3a_confs(_layout("s3a://lake/prod", {"aws_endpoint_url": "https://s3.example", "aws_access_key_id": "k",
                                                  "aws_secret_access_key": "s", "aws_session_token": "t",
                                                  "aws_virtual_hosted_style_request": "true"}))
    assert confs["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert confs["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert confs["spark.hadoop.fs.s3a.session.token"] == "t"
    assert confs["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")


def test_without_keys_s3a_keeps_its_default_credential_chain():
    confs = s3a_confs(_layout("s3://lake/prod", {"AWS_REGION": "eu-west-1"}))
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in confs
    assert "spark.hadoop.fs.s3a.endpoint" not in confs


def test_local_lakes_need_nothing(tmp_path):
    assert s3a_confs(LakeLayout(str(tmp_path))) == {} and lake_packages(LakeLayout(str(tmp_path))) == []


def test_spark_takes_the_configured_setting_over_an_environment_alias(monkeypatch):
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token")
    layout = LakeLayout("s3://lake/prod", lake_storage_options("s3://lake/prod", {"region": "us-east-1", "access_key_id": "k",
                                                                                  "secret_access_key": "s"}))
    confs = s3a_confs(layout)
    assert confs["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert "spark.hadoop.fs.s3a.session.token" not in confs
    assert confs["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")


@pytest.mark.spark
def test_a_submitted_job_sets_the_configured_credentials_at_start(spark):
    layout = _layout("s3://lake/creds-test", {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                                              "AWS_SESSION_TOKEN": "t"})
    assert "spark.hadoop.fs.s3a.secret.key" not in s3a_confs(layout, credentials=False)
    assert s3a_credential_env(layout) == {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"}
    hadoop = get_session(lake=layout)._jsc.hadoopConfiguration()
    assert (hadoop.get("fs.s3a.access.key"), hadoop.get("fs.s3a.secret.key"), hadoop.get("fs.s3a.session.token")) == ("k", "s", "t")
    for key in ("fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token", "fs.s3a.aws.credentials.provider"):
        hadoop.unset(key)


def test_a_pyspark_without_hadoop_jars_is_one_input_error(tmp_path, monkeypatch):
    import pyspark

    from tidelake.errors import InputError
    from tidelake.spark.s3a import hadoop_version

    (tmp_path / "jars").mkdir()
    monkeypatch.setattr(pyspark, "__file__", str(tmp_path / "__init__.py"))
    with pytest.raises(InputError, match=r"^no hadoop-client-api jar in .*not pyspark-client\)\?$"):
        hadoop_version()
