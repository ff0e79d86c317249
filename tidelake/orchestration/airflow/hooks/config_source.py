"""The changefeed config of an Airflow connection (the DAG factory's `config_conn_id`) or Variable
(`config_variable`, and `tidelake_config__<id>`), read through Airflow like any connection or
Variable (metadata DB, AIRFLOW_CONN_* / AIRFLOW_VAR_*, secrets backend) and written to its file on
this host (tidelake.orchestration.config_text). The connection's file is written at DAG
parse and again at the start of every task; the Variable's at every parse of the DAG file, which
every task does first on its worker (Airflow 3's task runner), so an edited Variable applies to
the next task. A Variable of one line is the path of a config file, of several lines the TOML
text. A missing connection or field is one InputError line naming the connection id and the field.
Owner: the DAG factory and the tasks it builds.
"""

from __future__ import annotations

from airflow.sdk import BaseHook, Variable
from airflow.sdk.exceptions import AirflowNotFoundException

from tidelake.errors import InputError
from tidelake.orchestration.config_text import variable_config_path, write_config_text


def config_from_connection(conn_id: str) -> str:
    """The path of the config file written from connection `conn_id`."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise InputError(f"connection {conn_id!r}: not defined (add it in Admin > Connections, an AIRFLOW_CONN_* "
                         "variable or the secrets backend)") from None
    return str(write_config_text(conn_id, conn.extra_dejson))


def config_from_variable(name: str) -> str | None:
    """The config path Variable `name` holds, or the file written from the TOML text it holds;
    None when the Variable is not set."""
    value = Variable.get(name, default=None)
    return None if value is None else variable_config_path(name, value)


def refresh_config(config_conn_id: str | None) -> None:
    """At a task's start: the config file of `config_conn_id` written again (nothing for a file's DAGs)."""
    if config_conn_id is not None:
        config_from_connection(config_conn_id)
