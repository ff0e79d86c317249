"""The merge DAG's warm-Spark tasks (tidelake.orchestration.connect_job) without Airflow or Spark:
which server they use, and how the child command's exit code fails the task."""

from __future__ import annotations

import sys

import pytest

from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.orchestration import connect_job
from tidelake.orchestration.connect_job import JobFailed, job_remote, run_job


def config(tmp_path, remote: str | None):
    doc = changefeed_document("cf", ["127.0.0.1:1"], tmp_path / "lake", spark={"remote": remote} if remote else None)
    return load_config(write_config(tmp_path / "cf.toml", doc))


def test_the_config_remote_comes_before_spark_remote(tmp_path):
    env = {"SPARK_REMOTE": "sc://from-env:15002"}
    assert job_remote(config(tmp_path, "sc://from-config:15002"), env) == "sc://from-config:15002"
    assert job_remote(config(tmp_path, None), env) == "sc://from-env:15002"
    assert job_remote(config(tmp_path, None), {}) is None
    with pytest.raises(InputError, match="SPARK_REMOTE must be a Spark Connect URL"):
        job_remote(config(tmp_path, None), {"SPARK_REMOTE": "local[2]"})


def test_bad_input_fails_the_task_as_input_and_other_failures_as_job_failures(tmp_path, monkeypatch):
    # the real command, exit 2: the config cannot be read, refused before any Spark is reached
    with pytest.raises(InputError, match="refused its input"):
        run_job("merge", ["--config", str(tmp_path / "missing.toml")], "sc://127.0.0.1:1")
    # any other failure (exit 1: a table failed) is a JobFailed, retried like a failed spark-submit
    monkeypatch.setattr(connect_job, "job_command", lambda *_: [sys.executable, "-c", "raise SystemExit(1)"])
    with pytest.raises(JobFailed, match="exited with code 1"):
        run_job("merge", ["--config", "cf.toml"], "sc://127.0.0.1:1")
    monkeypatch.setattr(connect_job, "job_command", lambda *_: [sys.executable, "-c", "print('merged')"])
    run_job("merge", ["--config", "cf.toml"], "sc://127.0.0.1:1")
