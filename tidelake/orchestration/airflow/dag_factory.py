"""changefeed_dags("orders_feed"): a user's DAG file in one call, its DAGs in the caller's globals.

Builds the puller, merge, maintenance and bootstrap DAGs of one changefeed (with [merge] follow,
the merge follower's too). Its config, first match wins: the file `config_path`; the extra `changefeed_toml` of connection `config_conn_id`; the
Airflow Variable `config_variable` (hooks.config_source); the files TIDELAKE_CONFIG names (their DAG
ids stay plain); the Airflow Variable `tidelake_config__<id>`. A Variable holds the TOML text or a
file's path. Otherwise DAG ids carry the id (`..__orders_feed`).
Found nowhere: one InputError line naming where it looked, that DAG file's import error only. The
other keywords are deployment settings (tidelake.orchestration.dag_options), checked the same way.
Owner: the user's DAG file, and dags/ of this repository.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import replace

from airflow.sdk import DAG

from tidelake.config import load_config
from tidelake.errors import InputError
from tidelake.orchestration.airflow.dags import bootstrap, maintenance, merge, merge_follow, puller
from tidelake.orchestration.airflow.hooks.config_source import config_from_connection, config_from_variable
from tidelake.orchestration.changefeeds import CONFIG_ENV, Changefeed, load_changefeeds
from tidelake.orchestration.dag_options import (
    DEFAULT_MAINTENANCE_SCHEDULE,
    DEFAULT_MERGE_SCHEDULE,
    DEFAULT_PULL_RUN_SECONDS,
    DagOptions,
)
from tidelake.orchestration.spark_submit import DEFAULT_CONN_ID

BUILDERS = (puller.build, merge.build, maintenance.build, bootstrap.build, merge_follow.build)
VARIABLE_PREFIX = "tidelake_config__"


def changefeed_dags(changefeed_id: str, config_path: str | None = None, *, config_conn_id: str | None = None,
                    config_variable: str | None = None,
                    spark_conn_id: str = DEFAULT_CONN_ID, bootstrap_spark_conn_id: str | None = None,
                    merge_schedule: str = DEFAULT_MERGE_SCHEDULE,
                    maintenance_schedule: str = DEFAULT_MAINTENANCE_SCHEDULE,
                    pull_run_seconds: int = DEFAULT_PULL_RUN_SECONDS) -> dict[str, DAG]:
    """Build the changefeed's DAGs into the caller's module globals; returns them by DAG id."""
    options = DagOptions(spark_conn_id=spark_conn_id, bootstrap_spark_conn_id=bootstrap_spark_conn_id,
                         merge_schedule=merge_schedule, maintenance_schedule=maintenance_schedule,
                         pull_run_seconds=pull_run_seconds)
    feed = find_changefeed(changefeed_id, config_path, config_conn_id, config_variable)
    dags = {dag.dag_id: dag for dag in (build(feed, options) for build in BUILDERS) if dag is not None}
    caller = inspect.currentframe().f_back
    caller.f_globals.update(dags)
    return dags


def find_changefeed(changefeed_id: str, config_path: str | None = None, config_conn_id: str | None = None,
                    config_variable: str | None = None) -> Changefeed:
    """The changefeed with this id from the first place that names one (module docstring)."""
    if config_path is not None:
        return _from_file(changefeed_id, config_path, "config_path")
    if config_conn_id is not None:
        try:
            path = config_from_connection(config_conn_id)
        except InputError as exc:
            raise InputError(f"changefeed {changefeed_id!r}: {exc}") from None
        return replace(_from_file(changefeed_id, path, f"connection {config_conn_id!r}"), config_conn_id=config_conn_id)
    if config_variable is not None:
        feed = _from_variable(changefeed_id, config_variable)
        if feed is None:
            raise InputError(f"changefeed {changefeed_id!r}: config_variable: Airflow Variable {config_variable!r} "
                             "is not set")
        return feed
    looked = []
    if os.environ.get(CONFIG_ENV, "").strip():
        feeds = load_changefeeds()
        for feed in feeds:
            if feed.config.changefeed_id == changefeed_id:
                return feed
        looked.append(f"{CONFIG_ENV} (changefeeds {', '.join(repr(f.config.changefeed_id) for f in feeds)})")
    else:
        looked.append(f"{CONFIG_ENV} (not set)")
    variable = VARIABLE_PREFIX + changefeed_id
    feed = _from_variable(changefeed_id, variable)
    if feed is not None:
        return feed
    looked.append(f"Airflow Variable {variable!r} (not set)")
    raise InputError(f"changefeed {changefeed_id!r} not found: looked in {' and '.join(looked)}")


def _from_variable(changefeed_id: str, name: str) -> Changefeed | None:
    try:
        path = config_from_variable(name)
    except InputError as exc:
        raise InputError(f"changefeed {changefeed_id!r}: {exc}") from None
    if path is None:
        return None
    return replace(_from_file(changefeed_id, path, f"Airflow Variable {name!r}"), config_variable=name)


def _from_file(changefeed_id: str, path: str, source: str) -> Changefeed:
    try:
        config = load_config(path)
    except InputError as exc:
        raise InputError(f"changefeed {changefeed_id!r}: {source}: {exc}") from None
    if config.changefeed_id != changefeed_id:
        raise InputError(f"changefeed {changefeed_id!r} not found: {source} names {path}, "
                         f"whose [changefeed].id is {config.changefeed_id!r}")
    return Changefeed(config_path=str(path), config=config, primary=False)
