"""The changefeeds the Replication page lists, read in the api-server from what Airflow stores.

The api-server parses no DAG file: it reads the latest serialized puller DAGs (tag `tidelake`, not
stale) and each one's config_record.PARAM, then the config from that source as the tasks do
(config_text), and a lake's [lake].aws_conn_id connection as its storage options. Connections and
Variables go through Airflow's core models, as the api-server's own routes: there the Task SDK's
readers skip the metadata DB (airflow.sdk.execution_time.supervisor.ensure_secrets_backend_loaded).
TIDELAKE_CONFIG's files, if set, come first. A config or connection that cannot be read is one
Unreadable line naming the changefeed; the others still show. Owner: the Airflow plugin.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from airflow.exceptions import AirflowNotFoundException
from airflow.models.connection import Connection
from airflow.models.dag import DagModel, DagTag
from airflow.models.serialized_dag import SerializedDagModel
from airflow.models.variable import Variable
from airflow.utils.session import create_session
from sqlalchemy import select

from tidelake.config import load_config
from tidelake.errors import InputError
from tidelake.orchestration.aws_connection import aws_lake_settings, not_defined
from tidelake.orchestration.changefeeds import CONFIG_ENV, Changefeed, load_changefeeds
from tidelake.orchestration.config_record import PARAM, record_source
from tidelake.orchestration.config_text import variable_config_path, write_config_text

PULLER_DAG = "tidelake_puller"  # Changefeed.dag_id("puller"), with or without "__<changefeed id>"


@dataclass(frozen=True)
class Unreadable:
    """A deployed changefeed whose config cannot be read: its id and the one-line reason."""

    changefeed_id: str
    error: str


def deployed_changefeeds() -> list[Changefeed | Unreadable]:
    """Every changefeed of TIDELAKE_CONFIG (when set) and of the serialized puller DAGs, by id once."""
    entries: list[Changefeed | Unreadable] = []
    if os.environ.get(CONFIG_ENV, "").strip():
        try:
            entries.extend(load_changefeeds())
        except InputError as exc:
            entries.append(Unreadable(CONFIG_ENV, str(exc)))
    seen = {entry_id(e) for e in entries}
    for dag_id, record in puller_records():
        entry = _read(dag_id, record)
        if entry_id(entry) not in seen:
            seen.add(entry_id(entry))
            entries.append(entry)
    return [_with_lake_connection(e) if isinstance(e, Changefeed) else e for e in entries]


def entry_id(entry: Changefeed | Unreadable) -> str:
    """The changefeed id of an entry, read or not."""
    return entry.config.changefeed_id if isinstance(entry, Changefeed) else entry.changefeed_id


def puller_records() -> list[tuple[str, object]]:
    """(DAG id, PARAM's value) of every current puller DAG that records one, by DAG id."""
    with create_session() as session:
        dag_ids = session.scalars(
            select(DagModel.dag_id).join(DagTag, DagTag.dag_id == DagModel.dag_id)
            .where(DagTag.name == "tidelake", DagModel.is_stale.is_(False),
                   (DagModel.dag_id == PULLER_DAG) | DagModel.dag_id.startswith(f"{PULLER_DAG}__", autoescape=True))
        ).all()
        rows = SerializedDagModel.get_latest_serialized_dags(dag_ids=sorted(dag_ids), session=session)
        dags = sorted((row.dag_id, row.dag) for row in rows)
    return [(dag_id, dag.params[PARAM]) for dag_id, dag in dags if PARAM in dag.params]


def _read(dag_id: str, record: object) -> Changefeed | Unreadable:
    try:
        changefeed_id, kind, value = record_source(record, dag_id)
    except InputError as exc:
        return Unreadable(dag_id, str(exc))
    try:
        path = _config_path(kind, value)
        config = load_config(path)
        if config.changefeed_id != changefeed_id:
            raise InputError(f"{path}: [changefeed].id is {config.changefeed_id!r} now")
    except InputError as exc:
        field = "" if kind == "config_conn_id" else f"{kind}: "  # the connection's error names its id and field
        return Unreadable(changefeed_id, f"changefeed {changefeed_id!r}: DAG {dag_id!r}: {field}{exc}")
    return Changefeed(config_path=str(path), config=config, primary=False,
                      config_conn_id=value if kind == "config_conn_id" else None,
                      config_variable=value if kind == "config_variable" else None)


def _with_lake_connection(feed: Changefeed) -> Changefeed | Unreadable:
    """The changefeed reading its lake with its [lake].aws_conn_id connection's settings as storage
    options (AwsLakeSettings.lake; the api-server's environment is never changed), or the
    connection's one-line error."""
    lake = feed.config.lake
    if lake.aws_conn_id is None:
        return feed
    try:
        try:
            conn = Connection.get_connection_from_secrets(lake.aws_conn_id)
        except AirflowNotFoundException:
            raise not_defined(lake.aws_conn_id) from None
        settings = aws_lake_settings(lake.aws_conn_id, conn.conn_type, conn.login, conn.password, conn.extra_dejson,
                                     lake.storage_options)
    except Exception as exc:  # noqa: BLE001 - a secrets backend's error is this changefeed's line, not a 500
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return Unreadable(feed.config.changefeed_id, f"changefeed {feed.config.changefeed_id!r}: {first}")
    return replace(feed, config=replace(feed.config, lake=settings.lake(lake)))


def _config_path(kind: str, value: str) -> str:
    """The config file of a source, read through Airflow's core models (module docstring)."""
    if kind == "config_conn_id":
        try:
            conn = Connection.get_connection_from_secrets(value)
        except AirflowNotFoundException:
            raise InputError(f"connection {value!r}: not defined") from None
        return str(write_config_text(value, conn.extra_dejson))
    if kind == "config_variable":
        text = Variable.get(value, default_var=None)
        if text is None:
            raise InputError(f"Airflow Variable {value!r} is not set")
        return variable_config_path(value, text)
    return value
