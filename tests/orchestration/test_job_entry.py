"""The Spark jobs' one contract (tidelake.orchestration.job_spec) and how it is run
(tidelake.orchestration.job_entry), without Airflow or Spark: specs round trip and anything else is
refused whole before a session exists, and which Spark the DAG's jobs use."""

from __future__ import annotations

import json

import pytest

from tidelake.config import load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.errors import InputError
from tidelake.orchestration.job_entry import JobFailed, run_job, run_on_warm_spark, spark_submit_main
from tidelake.orchestration.job_spec import (
    SPEC_VERSION,
    BootstrapJob,
    MaintenanceJob,
    MergeJob,
    SyncpointJob,
    from_json,
    to_json,
)
from tidelake.syncpoint.cut import SyncpointOutcome, SyncpointResult


def config(tmp_path, remote: str | None):
    doc = changefeed_document("cf", ["127.0.0.1:1"], tmp_path / "lake", spark={"remote": remote} if remote else None)
    return load_config(write_config(tmp_path / "cf.toml", doc))


def test_the_config_remote_comes_before_spark_remote(tmp_path):
    """For the `tidelake` commands; the DAGs' Spark is their connection (spark_operator)."""
    env = {"SPARK_REMOTE": "sc://from-env:15002"}
    assert config(tmp_path, "sc://from-config:15002").spark.remote_or_env(env) == "sc://from-config:15002"
    assert config(tmp_path, None).spark.remote_or_env(env) == "sc://from-env:15002"
    assert config(tmp_path, None).spark.remote_or_env({}) is None
    with pytest.raises(InputError, match="SPARK_REMOTE must be a Spark Connect URL"):
        config(tmp_path, None).spark.remote_or_env({"SPARK_REMOTE": "local[2]"})


@pytest.mark.parametrize("spec", [
    MergeJob("/cf.toml", ("shop.orders", "shop.items"), 1 << 60, None),
    MergeJob("/cf.toml", ("shop.orders",), None, "shop.orders"),
    SyncpointJob("/cf.toml"), MaintenanceJob("/cf.toml"),
    BootstrapJob("/cf.toml", ("shop.new",), None), BootstrapJob("/cf.toml"),
])
def test_a_spec_reads_back_as_written(spec):
    text = to_json(spec)
    assert json.loads(text)["version"] == SPEC_VERSION and json.loads(text)["kind"] == spec.kind
    assert from_json(text) == from_json(text, spec.kind) == spec


@pytest.mark.parametrize(("text", "message"), [
    ("--config /cf.toml", "job spec is not JSON"),
    ("[]", "must be a JSON object"),
    ('{"version": 2, "kind": "merge", "config": "c"}', "version 2: this tidelake runs version 1"),
    ('{"version": 1, "kind": "vacuum", "config": "c"}', "kind 'vacuum'"),
    ('{"version": 1, "kind": "merge", "config": "c", "threads": 4}', "unknown field 'threads'"),
    ('{"version": 1, "kind": "merge", "tables": []}', "field 'config' is missing"),
    ('{"version": 1, "kind": "merge", "config": "c", "tables": "a.b"}', "'tables' must be tuple"),
    ('{"version": 1, "kind": "merge", "config": "c", "until_ts": true}', "'until_ts' must be int | None"),
    ('{"version": true, "kind": "merge", "config": "c"}', "version True: this tidelake runs version 1"),
    ('{"version": 1.0, "kind": "merge", "config": "c"}', "version 1.0: this tidelake runs version 1"),
    ('{"kind": "merge", "config": "c"}', "version None: this tidelake runs version 1"),
    ('{"version": 1, "kind": [1], "config": "c"}', r"kind \[1\]: expected merge or"),
    ('{"version": 1, "kind": {"a": 1}, "config": "c"}', "kind {'a': 1}: expected merge or"),
    ('{"version": 1, "kind": "merge", "config": "c", "until_ts": -5}', r"'until_ts' must be a TSO \(0 < ts < 2\^64\), got -5"),
    ('{"version": 1, "kind": "merge", "config": "c", "until_ts": 0}', "'until_ts' must be a TSO"),
    ('{"version": 1, "kind": "merge", "config": "c", "until_ts": 18446744073709551616}', "'until_ts' must be a TSO"),
    ('{"version": 1, "kind": "merge", "config": "c", "until_ts": 1.5}', "'until_ts' must be int | None, got 1.5"),
    ('{"version": 1, "kind": "bootstrap", "config": "c", "at_ts": "5"}', "'at_ts' must be int | None"),
    ('{"version": 1, "kind": "bootstrap", "config": "c", "at_ts": -1}', "bootstrap job spec: field 'at_ts' must be a TSO"),
    ('{"version": 1, "kind": "merge", "config": 7}', "field 'config' must be str, got 7"),
])
def test_anything_else_is_refused_in_one_line(text, message):
    with pytest.raises(InputError, match=message):
        from_json(text)


def test_an_entry_point_runs_only_its_own_kind_and_bad_input_is_exit_code_2(tmp_path, capsys):
    assert spark_submit_main("merge", [to_json(SyncpointJob(str(tmp_path / "cf.toml")))]) == 2
    assert "kind 'syncpoint': expected merge" in capsys.readouterr().err
    assert spark_submit_main("merge", ["--config", "cf.toml"]) == 2
    assert "takes one argument" in capsys.readouterr().err
    assert spark_submit_main("merge", [to_json(MergeJob(str(tmp_path / "missing.toml")))]) == 2


def test_a_warm_spark_job_refuses_bad_input_before_any_session(tmp_path):
    with pytest.raises(InputError, match="missing.toml"):
        run_on_warm_spark(to_json(MergeJob(str(tmp_path / "missing.toml"))), "sc://127.0.0.1:1")
    with pytest.raises(InputError, match="not JSON"):
        run_on_warm_spark("--config cf.toml", "sc://127.0.0.1:1")


@pytest.mark.parametrize("outcome, fails", [(SyncpointOutcome.HELD, False), (SyncpointOutcome.INCOMPLETE, True)])
def test_a_syncpoint_another_writer_put_off_is_a_warning_and_an_incomplete_one_fails(tmp_path, monkeypatch, caplog,
                                                                                     outcome, fails):
    doc = changefeed_document("cf", ["127.0.0.1:1"], tmp_path / "lake", merge={"syncpoint_interval": "10s"})
    cf = load_config(write_config(tmp_path / "cf.toml", doc))
    line = "replica of shop.orders is being written by `tidelake merge` (host h, pid 7) since T"
    monkeypatch.setattr("tidelake.orchestration.job_entry.run_syncpoint",
                        lambda spark, layout, interval: SyncpointResult(1 << 60, outcome, line))
    if fails:
        with pytest.raises(JobFailed, match=f"syncpoint {1 << 60} not taken: replica of shop.orders"):
            run_job(SyncpointJob(str(tmp_path / "cf.toml")), cf, None)
    else:
        run_job(SyncpointJob(str(tmp_path / "cf.toml")), cf, None)
        assert f"syncpoint {1 << 60} not taken now: {line}" in caplog.text
