"""The changefeed config of an Airflow connection (the DAG factory's `config_conn_id`), read through
Airflow like any connection (metadata DB, AIRFLOW_CONN_*, secrets backend) and written to its file
on this host (tidelake.orchestration.config_connection): at DAG parse, and again at the start of
every task, so a worker that never parsed the DAG has the file and an edited connection applies.
A missing connection or field is one InputError line naming the connection id and the field.
Owner: the DAG factory and the tasks it builds.
"""

from __future__ import annotations

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from tidelake.errors import InputError
from tidelake.orchestration.config_connection import write_config_text


def config_from_connection(conn_id: str) -> str:
    """The path of the config file written from connection `conn_id`."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise InputError(f"connection {conn_id!r}: not defined (add it in Admin > Connections, an AIRFLOW_CONN_* "
                         "variable or the secrets backend)") from None
    return str(write_config_text(conn_id, conn.extra_dejson))


def refresh_config(config_conn_id: str | None) -> None:
    """At a task's start: the config file of `config_conn_id` written again (nothing for a file's DAGs)."""
    if config_conn_id is not None:
        config_from_connection(config_conn_id)
