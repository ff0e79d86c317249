"""SparkSubmitOperator kwargs: Delta jars and confs as local sessions use, hadoop-aws for s3
lakes, the worker's Python for executors, and a tidelake zip that imports on its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pyspark
import pytest

import tidelake
from tidelake.config import LakeConfig
from tidelake.errors import InputError
from tidelake.orchestration.job_spec import MergeJob, to_json
from tidelake.orchestration.spark_submit import (
    SparkSettings,
    build_package_zip,
    spark_submit_kwargs,
)
from tidelake.spark.s3a import hadoop_version
from tidelake.spark.spark_session import DELTA_CONFS, delta_package


@pytest.fixture(autouse=True)
def _no_aws_environment(monkeypatch):
    """The kwargs of an s3 lake read the AWS_* variables: the tests see none of the machine's."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)


@pytest.mark.parametrize("job", ["merge", "syncpoint", "maintenance", "bootstrap"])
def test_the_entry_points_ship_in_the_package(job, tmp_path):
    """An installed tidelake (a wheel, no repository) submits its own entry point by default."""
    kwargs = spark_submit_kwargs(SparkSettings(), job=job, app_name="j", lake=LakeConfig(str(tmp_path)))
    application = Path(kwargs["application"])
    assert application.is_file()
    assert application.is_relative_to(Path(tidelake.__file__).parent)


def test_defaults_use_the_local_delta_setup(tmp_path):
    settings = SparkSettings.from_extras("spark_default", {})
    kwargs = spark_submit_kwargs(replace(settings, jobs_dir=tmp_path), job="merge", app_name="m",
                                 lake=LakeConfig(str(tmp_path / "lake")), application_args=["--table", "a.b"])
    assert "conn_id" not in kwargs  # the operator's, from the DAG factory
    assert kwargs["application"] == str(tmp_path / "merge_job.py")
    assert kwargs["packages"] == delta_package()
    assert DELTA_CONFS.items() <= kwargs["conf"].items()
    assert kwargs["conf"]["spark.pyspark.python"] == sys.executable
    assert kwargs["env_vars"]["PYSPARK_PYTHON"] == sys.executable
    assert kwargs["application_args"] == ["--table", "a.b"]
    assert kwargs["deploy_mode"] == "client"


def test_s3_lakes_get_hadoop_aws_matching_the_bundled_hadoop_and_their_s3a_confs():
    lake = LakeConfig("s3://lake/prod", storage_options={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    kwargs = spark_submit_kwargs(SparkSettings(), job="merge", app_name="m", lake=lake)
    packages = kwargs["packages"].split(",")
    jars = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")}
    assert jars == {f"hadoop-client-api-{hadoop_version()}.jar"}
    assert packages[1] == f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"
    assert kwargs["conf"]["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert kwargs["conf"]["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"


@pytest.mark.parametrize("as_text", [False, True])
def test_the_spark_connection_extras_override(as_text):
    """The `spark` connection's extras, as JSON values or as the text a form field holds."""
    conf = {"spark.hadoop.fs.s3a.endpoint": "http://minio:9000", "spark.sql.session.timeZone": "UTC"}
    packages = ["org.example:x:1", delta_package()]
    extras = {"spark_python": "/usr/bin/python3", "spark_conf": json.dumps(conf) if as_text else conf,
              "spark_packages": ", ".join(packages) if as_text else packages}
    settings = SparkSettings.from_extras("spark_cluster", extras)
    kwargs = spark_submit_kwargs(settings, job="merge", app_name="m", lake=LakeConfig("/l"))
    assert kwargs["conf"]["spark.pyspark.python"] == "/usr/bin/python3"
    assert kwargs["conf"]["spark.hadoop.fs.s3a.endpoint"] == "http://minio:9000"
    assert kwargs["packages"].split(",") == [delta_package(), "org.example:x:1"]


def test_a_jar_folder_replaces_packages_with_the_classpath_of_driver_and_executors(tmp_path):
    """spark_jars_dir: nothing for spark-submit to resolve or ship (tidelake.spark.cluster_jars);
    a folder lacking a package the lake needs is refused with the command that fills it."""
    from tidelake.spark.cluster_jars import MANIFEST
    from tidelake.spark.s3a import hadoop_aws_package

    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / MANIFEST).write_text(delta_package() + "\n")
    settings = SparkSettings.from_extras("spark_default", {"spark_jars_dir": str(jars)})
    kwargs = spark_submit_kwargs(settings, job="merge", app_name="m", lake=LakeConfig(str(tmp_path / "lake")))
    assert "packages" not in kwargs and "spark.jars.ivySettings" not in kwargs["conf"]
    assert kwargs["conf"]["spark.driver.extraClassPath"] == kwargs["conf"]["spark.executor.extraClassPath"] == f"{jars}/*"
    with pytest.raises(InputError, match=f"spark_jars_dir {jars}: holds no jars of {hadoop_aws_package()} .*"
                                         f"tidelake spark-jars {jars}"):
        spark_submit_kwargs(settings, job="merge", app_name="m", lake=LakeConfig("s3://lake/prod"))


@pytest.mark.parametrize("extras, message", [
    ({"spark_conf": "{nope"}, "spark connection 'spark_x': spark_conf: not a JSON object"),
    ({"spark_conf": [1, 2]}, "spark connection 'spark_x': spark_conf: expected a JSON object of confs"),
    ({"spark_packages": 7}, "spark connection 'spark_x': spark_packages: expected Maven coordinates"),
    ({"spark_jars_dir": ["/a"]}, "spark connection 'spark_x': spark_jars_dir: expected a path"),
])
def test_bad_extras_are_one_line_naming_the_connection_and_field(extras, message):
    with pytest.raises(InputError) as err:
        SparkSettings.from_extras("spark_x", extras)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_package_zip_is_importable_alone_and_reused(tmp_path):
    first = build_package_zip(tmp_path)
    assert build_package_zip(tmp_path) == first
    names = zipfile.ZipFile(first).namelist()
    assert "tidelake/tso.py" in names
    assert "tidelake/spark/ivysettings.xml" in names
    assert not any("__pycache__" in n for n in names)
    probe = "import tidelake.tso, sys; print(tidelake.tso.__file__)"
    out = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(first)!r}); {probe}"],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip().startswith(str(first))


def test_no_secret_or_token_reaches_the_conf_or_the_spark_submit_command(monkeypatch, tmp_path):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    monkeypatch.setenv("AWS_SESSION_TOKEN", "env-token-value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret-value")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*]"}))
    lake = LakeConfig("s3://lake/prod", storage_options={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                                                         "AWS_ACCESS_KEY_ID": "cfg-key",
                                                         "AWS_SECRET_ACCESS_KEY": "cfg-secret-value",
                                                         "AWS_SESSION_TOKEN": "cfg-token-value"})
    kwargs = spark_submit_kwargs(SparkSettings(jobs_dir=tmp_path), job="merge",
                                 app_name="m", lake=lake, application_args=[to_json(MergeJob("c.toml"))])
    hook_kwargs = {k: v for k, v in kwargs.items() if k not in ("application", "application_args")}
    hook_kwargs["conn_id"] = "spark_default"
    argv = SparkSubmitHook(**hook_kwargs, application_args=kwargs["application_args"])._build_spark_submit_command(
        kwargs["application"])
    shown = json.dumps(kwargs) + " ".join(argv)
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in argv
    for secret in ("cfg-secret-value", "cfg-token-value", "env-secret-value", "env-token-value"):
        assert secret not in shown
    assert not any(".secret.key" in k or ".session.token" in k or ".access.key" in k for k in kwargs["conf"])
