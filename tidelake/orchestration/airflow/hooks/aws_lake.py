"""The lake's `aws` connection ([lake].aws_conn_id) in an Airflow task: its endpoint, region and keys
as the task process's AWS variables while the task runs, which every lake reader of the process and
the spark-submit it starts read (tidelake.lake.object_store; s3a's environment credential provider),
so they reach no command line, serialized DAG, rendered template or XCom. The secret and token are
masked in task logs. The connection type is the amazon provider's; that provider need not be
installed (the fields are read by tidelake.orchestration.aws_connection).
Owner: the tidelake provider, for every task that reads or writes the lake.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret

from tidelake.config import LakeConfig, load_config
from tidelake.errors import InputError
from tidelake.orchestration.aws_connection import CONN_TYPE, AwsLakeSettings, aws_lake_settings

log = logging.getLogger(__name__)


def lake_settings(aws_conn_id: str, lake: LakeConfig) -> AwsLakeSettings:
    """The connection's lake settings, its secrets registered with Airflow's log masker."""
    try:
        conn = BaseHook.get_connection(aws_conn_id)
    except AirflowNotFoundException:
        raise InputError(f"{CONN_TYPE} connection {aws_conn_id!r}: not defined (add it in Admin > Connections, "
                         "an AIRFLOW_CONN_* variable or the secrets backend)") from None
    settings = aws_lake_settings(aws_conn_id, conn.conn_type, conn.login, conn.password, conn.extra_dejson,
                                 lake.storage_options)
    for secret in settings.secrets():
        mask_secret(secret)
    return settings


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
