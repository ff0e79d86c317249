"""Airflow plugin: the "Replication" page (Browse menu) and its JSON endpoint.

Per table: resolved, barrier and checkpoint ts, lag and its recent history, pending and failed
DDL, last merges; per changefeed: syncpoints. Both routes require an authenticated Airflow user
(tidelake.orchestration.airflow.replication_app). Served by the api-server at /tidelake/replication
and /tidelake/api/status. Airflow loads it from the package's `airflow.plugins` entry point
(pyproject.toml), so an installed tidelake needs no file in a plugins folder; the provider info
lists it too, as Airflow's own providers list theirs.
Owner: the tidelake provider.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tidelake.orchestration.airflow.replication_app import create_app
from tidelake.orchestration.plugin_views import PAGE_PATH, URL_PREFIX

PLUGIN_NAME = "tidelake_replication"


class TidelakeReplicationPlugin(AirflowPlugin):
    name = PLUGIN_NAME
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "tidelake replication"}]
    external_views = [
        {
            "name": "Replication",
            "href": PAGE_PATH,
            "url_route": "replication",
            "destination": "nav",
            "category": "browse",
        }
    ]
