"""Airflow plugin: the "Replication" page (Browse menu) and its JSON endpoint.

Per table: resolved, barrier and checkpoint ts, lag and its recent history, pending and failed
DDL, last merges; per changefeed: syncpoints. Both routes require an authenticated Airflow user
(tidelake.orchestration.airflow.replication_app). Served by the api-server at /tidelake/replication
and /tidelake/api/status.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from tidelake.orchestration.airflow.replication_app import create_app

URL_PREFIX = "/tidelake"


class TidelakeReplicationPlugin(AirflowPlugin):
    name = "tidelake_replication"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "tidelake replication"}]
    external_views = [
        {
            "name": "Replication",
            "href": f"{URL_PREFIX}/replication",
            "url_route": "replication",
            "destination": "nav",
            "category": "browse",
        }
    ]
