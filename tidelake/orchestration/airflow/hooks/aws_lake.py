"""The lake's `aws` connection ([lake].aws_conn_id) in an Airflow task: its endpoint, region and keys
as the task process's AWS variables while the task runs, which every lake reader of the process and
the spark-submit it starts read (tidelake.lake.object_store; s3a's environment credential provider),
so they reach no command line, serialized DAG, rendered template or XCom. The secret and token are
masked in task logs. The connection type is the amazon provider's; that provider need not be
installed (the fields are read by tidelake.orchestration.aws_connection). In the DAG parse and the
triggerer, which serve many changefeeds in one process, the connection becomes the lake's storage
options instead (with_lake_connection; awith_lake_connection with the Task SDK's async reads).
Owner: the tidelake provider, for every task, trigger and DAG parse that reads the lake.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import amask_secret, mask_secret

from tidelake.config import ChangefeedConfig, LakeConfig, load_config
from tidelake.orchestration.aws_connection import CONN_TYPE, AwsLakeSettings, aws_lake_settings, not_defined

log = logging.getLogger(__name__)


def lake_settings(aws_conn_id: str, lake: LakeConfig) -> AwsLakeSettings:
    """The connection's lake settings, its secrets registered with Airflow's log masker."""
    try:
        conn = BaseHook.get_connection(aws_conn_id)
    except AirflowNotFoundException:
        raise not_defined(aws_conn_id) from None
    settings = aws_lake_settings(aws_conn_id, conn.conn_type, conn.login, conn.password, conn.extra_dejson,
                                 lake.storage_options)
    for secret in settings.secrets():
        mask_secret(secret)
    return settings


async def alake_settings(aws_conn_id: str, lake: LakeConfig) -> AwsLakeSettings:
    """lake_settings in a trigger: the Task SDK's async reads, which the triggerer's event loop
    needs (its sync ones would block the loop on the supervisor's reply)."""
    try:
        conn = await BaseHook.aget_connection(aws_conn_id)
    except AirflowNotFoundException:
        raise not_defined(aws_conn_id) from None
    settings = aws_lake_settings(aws_conn_id, conn.conn_type, conn.login, conn.password, await conn.aextra_dejson(),
                                 lake.storage_options)
    for secret in settings.secrets():
        await amask_secret(secret)
    return settings


def with_lake_connection(config: ChangefeedConfig) -> ChangefeedConfig:
    """`config` whose lake reads the store with its [lake].aws_conn_id connection's settings, not the
    process's AWS variables (AwsLakeSettings.lake); unchanged without one. For the DAG parse."""
    if config.lake.aws_conn_id is None:
        return config
    return replace(config, lake=lake_settings(config.lake.aws_conn_id, config.lake).lake(config.lake))


async def awith_lake_connection(config: ChangefeedConfig) -> ChangefeedConfig:
    """with_lake_connection in a trigger."""
    if config.lake.aws_conn_id is None:
        return config
    settings = await alake_settings(config.lake.aws_conn_id, config.lake)
    return replace(config, lake=settings.lake(config.lake))


@contextmanager
def lake_connection(lake: LakeConfig) -> Iterator[None]:
    """While the block runs, the process's AWS variables are the lake's connection (no change
    without [lake].aws_conn_id); they are restored after it."""
    if lake.aws_conn_id is None:
        yield
        return
    settings = lake_settings(lake.aws_conn_id, lake)
    log.info("lake store from the %s connection: %s", CONN_TYPE, settings.summary())
    with task_environment(settings.environment()):
        yield


@contextmanager
def task_environment(changes: dict[str, str | None]) -> Iterator[None]:
    """While the block runs, the task process's variables changed as `changes` says (None: removed),
    which a child process (spark-submit) inherits; restored after it."""
    saved = {name: os.environ.get(name) for name in changes}
    _apply(changes)
    try:
        yield
    finally:
        _apply(saved)


def _apply(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextmanager
def lake_connection_of(config_path: str) -> Iterator[None]:
    """lake_connection of the changefeed config at `config_path` (a bad config is its InputError)."""
    with lake_connection(load_config(config_path).lake):
        yield
