"""Where a changefeed's config comes from, as its puller DAG records it for the api-server.

The api-server parses no DAG file, so the Replication page learns the deployed changefeeds from
the serialized DAGs in Airflow's metadata DB: the DAG factory gives each puller DAG the param
PARAM, a JSON Schema `const` (the trigger form does not show it and a run cannot change it),
whose value names the changefeed and its config's source: `config_path` (a file),
`config_conn_id` (a connection whose extras hold the text) or `config_variable` (a Variable holding
the text or a path), never the config's text or a secret.
Owner: the DAG factory writes it (dags/puller.py); the Replication app reads it
(tidelake.orchestration.airflow.deployed_changefeeds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidelake.errors import InputError
from tidelake.orchestration.changefeeds import Changefeed

PARAM = "tidelake_config_source"
SOURCES = ("config_path", "config_conn_id", "config_variable")


def config_record(feed: Changefeed) -> dict[str, str]:
    """The record of `feed`: its changefeed id and the one source its config is read from."""
    if feed.config_conn_id is not None:
        return {"changefeed_id": feed.config.changefeed_id, "config_conn_id": feed.config_conn_id}
    if feed.config_variable is not None:
        return {"changefeed_id": feed.config.changefeed_id, "config_variable": feed.config_variable}
    return {"changefeed_id": feed.config.changefeed_id, "config_path": feed.config_path}


def record_source(record: Any, dag_id: str) -> tuple[str, str, str]:
    """(changefeed id, source kind, its value) of a record read back; InputError naming the DAG."""
    if not isinstance(record, Mapping) or not isinstance(record.get("changefeed_id"), str):
        raise InputError(f"DAG {dag_id!r}: param {PARAM}: expected {{'changefeed_id': ..., "
                         f"one of {', '.join(SOURCES)}: ...}}, got {record!r}")
    kinds = [kind for kind in SOURCES if isinstance(record.get(kind), str)]
    if len(kinds) != 1:
        raise InputError(f"changefeed {record['changefeed_id']!r}: DAG {dag_id!r}: param {PARAM}: "
                         f"expected one of {', '.join(SOURCES)}, got {sorted(record)}")
    return record["changefeed_id"], kinds[0], record[kinds[0]]
