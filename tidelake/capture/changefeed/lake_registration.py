"""PD's etcd key `/tidelake/changefeed/<cluster id>/<changefeed id>/lake`: the lake a changefeed
feeds. A puller of the same changefeed id on another lake root (an edited `[lake] root`, a second
deployment on a fresh bucket) is refused before it lands anything or takes the GC service
safepoint both would share. The record is outside the lake because PD cannot list service
safepoints; TiCDC keeps its changefeeds in PD's etcd the same way (pingcap/tiflow
pkg/etcd/etcdkey.go). Every shard registers, idempotently; a lake from before the record adopts
it at its next start. Owner: the changefeed's pullers.

More: docs/internals.md#lake_registration, docs/operations.md#moving-or-re-creating-a-lake.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

from tidelake.config import ChangefeedConfig
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.pd_etcd import create_if_absent
from tidelake.upstream.upstream_errors import EtcdApiUnavailable

log = logging.getLogger(__name__)


def registration_key(cluster_id: int, changefeed: str) -> str:
    return f"/tidelake/changefeed/{cluster_id}/{changefeed}/lake"


def register_lake(pd: PDClient, config: ChangefeedConfig, layout: LakeLayout) -> None:
    """Record this lake for the changefeed, or go on if it is the recorded one; another lake
    recorded is an InputError naming it. A PD without etcd's API is warned about, not refused."""
    key = registration_key(pd.cluster_id, config.changefeed_id)
    value = json.dumps({"lake": layout.root, "registered_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    try:
        created, kv = create_if_absent(pd, key.encode(), value.encode())
    except EtcdApiUnavailable as exc:
        log.warning("changefeed %s is not registered in PD's etcd (%s): another lake started with this "
                    "changefeed id would not be refused", config.changefeed_id, exc)
        return
    if created:
        log.info("changefeed %s registered to the lake at %s (PD's etcd key %s)", config.changefeed_id, layout.root, key)
        return
    lake, at = registered_lake(kv.value)
    if lake == layout.root:
        return
    pd_endpoints = ",".join(config.upstream.pd)
    raise InputError(
        f"{config.source}: changefeed {config.changefeed_id!r} is registered to the lake at {lake}{at} (PD's etcd key "
        f"{key}), not {layout.root}: both lakes would share GC service safepoint {config.gc_service_id}. Give "
        f"this lake a new [changefeed] id, or, if the lake really moved here (copied from there), remove the registration with "
        f"`etcdctl --endpoints {pd_endpoints} del {key}` and start again")


def registered_lake(value: bytes) -> tuple[str, str]:
    """(the registered lake root, " since <when>" or ""); a value that is not a registration is
    shown as it is."""
    text = value.decode(errors="replace")
    try:
        record = json.loads(text)
    except ValueError:
        return text, ""
    if not isinstance(record, dict) or not isinstance(record.get("lake"), str):
        return text, ""
    at = record.get("registered_at")
    return record["lake"], f" since {at}" if isinstance(at, str) else ""
