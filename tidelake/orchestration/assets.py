"""Airflow Assets for replica tables: their URIs and the extra of the events merge emits.

An asset per replica table lets downstream DAGs schedule on "orders got new data" and read
from the event how far it got: `checkpoint_ts` (the replica equals upstream as of this TSO)
and `delta_version` (the replica's Delta version holding it, for time travel or CDF reads).
The URI names the changefeed, because one lake may hold several changefeeds' tables and an
Airflow asset is global to the deployment.
Owner: the merge DAG, which emits the events (tidelake.orchestration.merge_dag); the syncpoint
task's outlet is its changefeed's Iceberg catalog.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from sqlalchemy.engine import make_url

from tidelake import tso
from tidelake.config import ChangefeedConfig
from tidelake.consumers.iceberg.iceberg_catalog import catalog_uri
from tidelake.lake.layout import TIDELAKE_DIR, LakeLayout

ASSET_SCHEME = "tidelake"
ICEBERG_ASSET_SCHEME = "tidelake-iceberg"
ASSET_GROUP = "tidelake"


def replica_asset_uri(changefeed_id: str, table: str) -> str:
    """`tidelake://<changefeed>/<db>/<table>` for the replica of `db.table` (names URL-quoted)."""
    db, _, name = table.partition(".")
    return f"{ASSET_SCHEME}://{quote(changefeed_id, safe='')}/{quote(db, safe='')}/{quote(name, safe='')}"


def changelog_asset_uri(changefeed_id: str) -> str:
    """`tidelake://<changefeed>/_tidelake/changelog` for the changefeed's changelog (its path in the
    lake; no replica has that name): the asset [merge].run_on_new_data schedules merge runs on.
    Its events come from its watcher's trigger, not from a task."""
    return f"{ASSET_SCHEME}://{quote(changefeed_id, safe='')}/{TIDELAKE_DIR}/changelog"


def iceberg_catalog_asset_uri(config: ChangefeedConfig) -> str:
    """`tidelake-iceberg://<host[:port]>/<database>/<catalog name>` for the Iceberg catalog the
    syncpoint job publishes to: one asset per catalog, whichever changefeeds publish to it; the
    database's host (`localhost` for a SQLite file) and name, never its user or password."""
    url = make_url(catalog_uri(LakeLayout.from_config(config.lake), config.iceberg))
    host = f"{url.host}:{url.port}" if url.port else url.host or "localhost"
    return (f"{ICEBERG_ASSET_SCHEME}://{quote(host, safe=':')}/{quote(url.database or '', safe='')}/"
            f"{quote(config.iceberg.catalog_name, safe='')}")


def merge_alias_name(changefeed_id: str) -> str:
    """The AssetAlias merge emits through: the set of tables that advanced is known only at run
    time, and tables appear with CREATE TABLE, so the events are attached dynamically."""
    return f"tidelake-merge-{changefeed_id}"


@dataclass(frozen=True)
class ReplicaVersion:
    """Where a replica stands after a merge: its checkpoint and the Delta version holding it."""

    checkpoint_ts: int
    delta_version: int


def asset_event_extra(state: ReplicaVersion) -> dict[str, object]:
    return {
        "checkpoint_ts": state.checkpoint_ts,
        "checkpoint_time": tso.to_datetime(state.checkpoint_ts).isoformat(),
        "delta_version": state.delta_version,
    }


def changed_replicas(
    before: Mapping[str, ReplicaVersion | None], after: Mapping[str, ReplicaVersion]
) -> dict[str, ReplicaVersion]:
    """Replicas that got a new Delta commit during the run (a moved checkpoint or an applied
    DDL): one event each, so consumers are triggered only by new data."""
    return {table: state for table, state in sorted(after.items()) if before.get(table) != state}
