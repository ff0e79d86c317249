"""get_provider_info(): what Airflow's ProvidersManager learns about tidelake from its
`apache_airflow_provider` entry point (pyproject.toml), without importing any hook or operator.

The dict follows Airflow's runtime schema (airflow/provider_info.schema.json); the connection
form is declared here (`conn-fields`, `ui-field-behaviour`), as Airflow 3.2+ reads it instead of
the hooks' deprecated get_connection_form_widgets/get_ui_field_behaviour. Imports no Airflow:
the providers manager calls it while it scans installed packages.
Owner: the tidelake provider; Airflow calls it through the entry point.
"""

from __future__ import annotations

from typing import Any

from tidelake import __version__
from tidelake.orchestration.pd_connection import CONN_TYPE, DEFAULT_PD_PORT, HOOK_NAME

PACKAGE_NAME = "tidelake"  # the distribution's name: Airflow refuses provider info naming another
INTEGRATION = "tidelake"
_AIRFLOW = "tidelake.orchestration.airflow"


def _text_field(label: str, description: str, secret: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"]}
    if secret:
        schema["format"] = "password"  # the form hides it and the API redacts it
    return {"label": label, "description": description, "schema": schema}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE_NAME,
        "name": "tidelake",
        "description": "Replicate TiDB tables into Delta Lake: puller, Spark merges and their DAGs.",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["software"]}],
        "hooks": [{"integration-name": INTEGRATION, "python-modules": [f"{_AIRFLOW}.hooks.tidb_pd"]}],
        "operators": [{"integration-name": INTEGRATION, "python-modules": [
            f"{_AIRFLOW}.puller_operator", f"{_AIRFLOW}.spark_operator"]}],
        "triggers": [{"integration-name": INTEGRATION, "python-modules": [f"{_AIRFLOW}.new_data_trigger"]}],
        # also the `airflow.plugins` entry point, which is what loads it (lazy provider discovery)
        "plugins": [{"name": "tidelake_replication",
                     "plugin-class": f"{_AIRFLOW}.replication_plugin.TidelakeReplicationPlugin"}],
        "connection-types": [{
            "hook-class-name": f"{_AIRFLOW}.hooks.tidb_pd.TiDBPDHook",
            "hook-name": HOOK_NAME,
            "connection-type": CONN_TYPE,
            "ui-field-behaviour": {
                "hidden-fields": ["schema", "login", "password"],
                "relabeling": {"host": "PD host", "port": "PD port"},
                "placeholders": {"host": "pd-0.pd.tidb", "port": str(DEFAULT_PD_PORT)},
            },
            "conn-fields": {
                "pd_endpoints": _text_field("More PD endpoints", "host:port, separated by commas"),
                "cluster": _text_field("Cluster name", "A label for logs and status; not sent to PD"),
                "tls_ca": _text_field("TLS CA", "PEM text or a file path on the workers"),
                "tls_cert": _text_field("TLS client certificate", "PEM text or a file path (mutual TLS)"),
                "tls_private_key": _text_field("TLS client key", "PEM text or a file path (mutual TLS)", secret=True),
            },
        }],
    }
