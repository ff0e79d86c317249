"""[lake].aws_conn_id where no task runs: the triggerer's new-data watch (the Task SDK's async reads),
the Replication page in the api-server (Airflow's core models) and the merge DAG's parse (its
trigger form's table list) read the lake with the connection's settings as storage options, the
same delta-rs options a task gets from its AWS variables, without changing the process's
environment. A missing or wrong connection is one line naming it; the watch and the parse go on.
The connection is an AIRFLOW_CONN_* variable, as Airflow resolves any; no store is contacted."""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest

from tidelake.config import LakeConfig, load_config
from tidelake.config_writer import changefeed_document, write_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import Watermarks

SECRET = "tidelake-test-aws-secret-6502"
CONN = {"conn_type": "aws", "login": "AKIATIDELAKE", "password": SECRET,
        "extra": {"region_name": "eu-west-1", "endpoint_url": "http://s3.example:9000"}}
WORKER_ENV = {"AWS_ACCESS_KEY_ID": "worker-key", "AWS_SECRET_ACCESS_KEY": "worker-secret",
              "AWS_SESSION_TOKEN": "worker-token", "AWS_ENDPOINT_URL_S3": "http://wrong:1",
              "AWS_DEFAULT_REGION": "us-east-2"}
# What delta-rs gets from the connection, whatever the process's AWS variables say
OPTIONS = {"AWS_ACCESS_KEY_ID": "AKIATIDELAKE", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-west-1",
           "AWS_ENDPOINT_URL": "http://s3.example:9000", "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}


@pytest.fixture
def worker_env(monkeypatch):
    for name, value in WORKER_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AIRFLOW_CONN_LAKE_S3", raising=False)
    return monkeypatch


def define(monkeypatch, fields: dict) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_S3", json.dumps(fields))


def changefeed(tmp_path, merge: dict | None = None):
    return write_config(tmp_path / "tests.toml", changefeed_document(
        "tests", ["127.0.0.1:1"], "s3://bucket/lake", lake={"aws_conn_id": "lake_s3"}, merge=merge))


def test_the_storage_options_are_what_a_task_gets_from_its_environment(worker_env):
    from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection, lake_settings

    define(worker_env, CONN)
    lake = LakeConfig(root="s3://bucket/lake", aws_conn_id="lake_s3")
    read = lake_settings("lake_s3", lake).lake(lake)
    assert read.aws_conn_id is None and LakeLayout.from_config(read).storage_options == OPTIONS
    with lake_connection(lake):  # the task's way: its AWS variables
        assert LakeLayout.from_config(lake).storage_options == OPTIONS
    assert {name: os.environ.get(name) for name in WORKER_ENV} == WORKER_ENV


class Polls:
    """read_watermarks as the trigger calls it: the storage options of each poll, and a changelog
    that grows by one version per poll with every watermark far ahead (each version is covered);
    `lease`, live_holder as it calls it before: the options it read the lease store with, no follower."""

    def __init__(self) -> None:
        self.options: list[dict] = []
        self.lease_options: list[dict] = []

    def __call__(self, layout: LakeLayout) -> Watermarks:
        self.options.append(layout.storage_options)
        return Watermarks({1: 1 << 62}, 1 << 62, len(self.options))

    def lease(self, layout: LakeLayout, name: str) -> None:
        self.lease_options.append(layout.storage_options)
        return None


async def first_event(trigger, polls: Polls, define_after_polls: int | None = None, monkeypatch=None):
    """The trigger's first event; with `define_after_polls`, the connection is defined only once
    the trigger has polled (and failed) that many times."""
    events = trigger.run()
    pending = asyncio.ensure_future(events.__anext__())
    if define_after_polls is not None:
        while polls.failed < define_after_polls:
            await asyncio.sleep(0.01)
        define(monkeypatch, CONN)
    try:
        return (await asyncio.wait_for(pending, 10)).payload
    finally:
        await events.aclose()


def test_the_new_data_watch_reads_the_lake_with_the_connection(tmp_path, worker_env):
    import tidelake.orchestration.airflow.new_data_trigger as trigger_module

    define(worker_env, CONN)
    polls = Polls()
    worker_env.setattr(trigger_module, "read_watermarks", polls)
    worker_env.setattr(trigger_module, "live_holder", polls.lease)
    trigger = trigger_module.NewDataTrigger(config_path=str(changefeed(tmp_path)), floor_s=0, poll_s=0.01)
    assert asyncio.run(first_event(trigger, polls)) == {"changelog_version": 2, "resolved_ts": 1 << 62}
    assert polls.options == polls.lease_options == [OPTIONS, OPTIONS]
    assert {name: os.environ.get(name) for name in WORKER_ENV} == WORKER_ENV  # the triggerer's own, untouched
    assert SECRET not in json.dumps(trigger.serialize())  # what the scheduler stores of the trigger


def test_a_missing_connection_is_one_warning_and_the_watch_goes_on_until_it_is_defined(tmp_path, worker_env, caplog):
    import tidelake.orchestration.airflow.new_data_trigger as trigger_module

    class Counted(Polls):
        failed = 0

    polls = Counted()
    resolve = trigger_module.awith_lake_connection

    async def counted_resolve(config):
        try:
            return await resolve(config)
        except Exception:
            polls.failed += 1
            raise

    worker_env.setattr(trigger_module, "read_watermarks", polls)
    worker_env.setattr(trigger_module, "live_holder", polls.lease)
    worker_env.setattr(trigger_module, "awith_lake_connection", counted_resolve)
    trigger = trigger_module.NewDataTrigger(config_path=str(changefeed(tmp_path)), floor_s=0, poll_s=0.01)
    caplog.set_level(logging.WARNING)
    event = asyncio.run(first_event(trigger, polls, define_after_polls=3, monkeypatch=worker_env))
    assert event == {"changelog_version": 2, "resolved_ts": 1 << 62}
    assert polls.options == polls.lease_options == [OPTIONS, OPTIONS]
    warnings = [r.getMessage() for r in caplog.records if "cannot read the" in r.getMessage()]
    assert warnings == ["cannot read the merge follower's lease or the watermarks of s3://bucket/lake (will retry every "
                        "0 s): aws connection "
                        "'lake_s3': not defined (add it in Admin > Connections, an AIRFLOW_CONN_* variable or the "
                        "secrets backend)"]


def test_the_replication_page_reads_the_lake_with_the_connection(tmp_path, worker_env):
    import tidelake.orchestration.airflow.deployed_changefeeds as deployed

    worker_env.setattr(deployed, "puller_records", lambda: [])
    worker_env.setenv("TIDELAKE_CONFIG", str(changefeed(tmp_path)))
    define(worker_env, CONN)
    (feed,) = deployed.deployed_changefeeds()
    assert LakeLayout.from_config(feed.config.lake).storage_options == OPTIONS
    define(worker_env, {**CONN, "extra": {"role_arn": "arn:aws:iam::1:role/x"}})
    (entry,) = deployed.deployed_changefeeds()
    assert entry == deployed.Unreadable("tests", "changefeed 'tests': aws connection 'lake_s3': role_arn: not "
                                                 "supported for the lake (delta-rs and Spark's s3a get the endpoint "
                                                 "and static keys); give the keys as login and password")
    worker_env.delenv("AIRFLOW_CONN_LAKE_S3")
    (entry,) = deployed.deployed_changefeeds()
    assert entry.error.startswith("changefeed 'tests': aws connection 'lake_s3': not defined")


def test_the_merge_dags_parse_lists_the_tables_with_the_connection(tmp_path, worker_env, caplog):
    from tidelake.orchestration import merge_dag
    from tidelake.orchestration.airflow.dags import merge
    from tidelake.orchestration.changefeeds import Changefeed

    path = changefeed(tmp_path)
    feed = Changefeed(config_path=str(path), config=load_config(path), primary=True)
    read = []
    worker_env.setattr(merge_dag, "table_choices",
                       lambda config: read.append(LakeLayout.from_config(config.lake).storage_options) or ["a.t"])
    define(worker_env, CONN)
    assert merge.table_choices(feed) == ["a.t"] and read == [OPTIONS]
    worker_env.delenv("AIRFLOW_CONN_LAKE_S3")
    caplog.set_level(logging.WARNING)
    assert merge.table_choices(feed) == [] and read == [OPTIONS]  # no suggestions; the DAG still parses
    assert ("s3://bucket/lake: cannot list the lake's tables for the trigger form: aws connection 'lake_s3': "
            "not defined") in caplog.text
    assert SECRET not in caplog.text
