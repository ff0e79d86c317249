"""PullerOperator: SIGTERM to the task process reaches the runner as a graceful stop (the Task
SDK's SIGTERM handler calls on_kill, docs/stack.md#airflow-long-running-tasks), and the run length is bounded."""

from __future__ import annotations

import os
import signal
import threading
from datetime import timedelta

import pytest

from tidelake.config_writer import changefeed_document, write_config
from tidelake.orchestration.airflow.puller_operator import (
    SHUTDOWN_GRACE,
    PullerOperator,
)


class FakeRunner:
    """Stands in for PullerRunner: runs until stop(), then 'flushes' and reports."""

    instances: list[FakeRunner] = []

    def __init__(self, config, shard, options, progress=None):
        self.config, self.shard, self.options = config, shard, options
        self.stopped = threading.Event()
        self.flushed = False
        FakeRunner.instances.append(self)

    def stop(self):
        self.stopped.set()

    def run(self):
        from tidelake.capture.changefeed.puller_runner import RunSummary

        assert self.stopped.wait(30), "never asked to stop"
        self.flushed = True
        return RunSummary(start_ts=1, rows=5, jobs=1, table_resolved={10: 7}, ddl_resolved=9, bytes=2048)


def test_sigterm_stops_the_runner_gracefully(tmp_path, monkeypatch):
    import tidelake.capture.changefeed.puller_runner as runner_module
    import tidelake.orchestration.airflow.puller_operator as puller_operator

    tuned_before_runner = []
    monkeypatch.setattr(puller_operator, "tune_allocators",
                        lambda: tuned_before_runner.append(not FakeRunner.instances[n:]) or False)
    monkeypatch.setattr(runner_module, "PullerRunner", FakeRunner)
    n = len(FakeRunner.instances)
    doc = changefeed_document("tests", ["127.0.0.1:1"], "lake", puller={"shards": 2, "metrics_port": 9464})
    config = write_config(tmp_path / "tests.toml", doc)
    operator = PullerOperator(task_id="pull", config_path=str(config), shard="1/2", max_run_seconds=600)
    previous = signal.signal(signal.SIGTERM, lambda *_: operator.on_kill())  # what the Task SDK installs
    try:
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        result = operator.execute(context={})
    finally:
        signal.signal(signal.SIGTERM, previous)
    runner = FakeRunner.instances[-1]
    assert runner.flushed
    assert (runner.shard.index, runner.shard.count) == (1, 2)
    assert runner.options.max_run_s == 600.0
    assert runner.options.metrics_port == 9465  # [puller].metrics_port + the shard index
    assert runner.options.watch_rss  # the task has its process to itself: its RSS growth counts against the quota
    assert tuned_before_runner == [True]  # and the allocator settings of `tidelake pull`, before the runner
    assert result == {"rows": 5, "bytes": 2048, "ddl_jobs": 1, "ddl_resolved_ts": 9, "tables": 1}
    assert operator.execution_timeout == timedelta(seconds=600) + SHUTDOWN_GRACE


def test_a_bad_config_fails_the_task_in_one_line_without_retries(tmp_path):
    from airflow.sdk.exceptions import AirflowFailException

    (tmp_path / "bad.toml").write_text("[puller\n")
    operator = PullerOperator(task_id="pull", config_path=str(tmp_path / "bad.toml"), shard="0/1", max_run_seconds=60)
    with pytest.raises(AirflowFailException) as failed:
        operator.execute(context={})
    assert "bad.toml" in str(failed.value) and "\n" not in str(failed.value)


class RecordingRunner:
    """Stands in for PullerRunner: records the upstream it was given and whether its TLS files exist."""

    seen: list = []

    def __init__(self, config, shard, options, progress=None):
        self.upstream = config.upstream

    def run(self):
        from tidelake.capture.changefeed.puller_runner import RunSummary

        RecordingRunner.seen.append((self.upstream, os.path.exists(self.upstream.tls.ca)))
        return RunSummary(start_ts=1, rows=0, jobs=0, table_resolved={}, ddl_resolved=1)


def by_connection(tmp_path, conn_id: str):
    doc = changefeed_document("tests", ["127.0.0.1:1"], "lake")
    doc["upstream"] = {"connection": conn_id, "gc_ttl": "2h"}
    return write_config(tmp_path / "tests.toml", doc)


def test_upstream_connection_is_resolved_where_the_puller_task_starts(tmp_path, monkeypatch):
    import json

    import tidelake.capture.changefeed.puller_runner as runner_module

    monkeypatch.setattr(runner_module, "PullerRunner", RecordingRunner)
    ca = "-----BEGIN CERTIFICATE-----\nY2E=\n-----END CERTIFICATE-----\n"
    monkeypatch.setenv("AIRFLOW_CONN_TIDELAKE_TEST_UP", json.dumps(
        {"conn_type": "tidb_pd", "host": "pd-0.pd", "port": 2379, "extra": {"pd_endpoints": "pd-1.pd:2379", "tls_ca": ca}}))
    config = by_connection(tmp_path, "tidelake_test_up")
    PullerOperator(task_id="pull", config_path=str(config), shard="0/1", max_run_seconds=60).execute(context={})
    upstream, ca_existed = RecordingRunner.seen[-1]
    assert (upstream.pd, upstream.gc_ttl_s, upstream.connection) == (("pd-0.pd:2379", "pd-1.pd:2379"), 7200.0, None)
    assert ca_existed and not os.path.exists(upstream.tls.ca)  # the PEM files live while the puller runs


def test_a_missing_upstream_connection_fails_the_task_in_one_line_naming_it(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    monkeypatch.delenv("AIRFLOW_CONN_TIDELAKE_TEST_ABSENT", raising=False)
    config = by_connection(tmp_path, "tidelake_test_absent")
    operator = PullerOperator(task_id="pull", config_path=str(config), shard="0/1", max_run_seconds=60)
    with pytest.raises(AirflowFailException) as failed:
        operator.execute(context={})
    assert str(failed.value).startswith("tidb_pd connection 'tidelake_test_absent': not defined")
    assert "\n" not in str(failed.value)
