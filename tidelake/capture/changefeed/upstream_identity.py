"""`_tidelake/upstream`: which TiDB cluster a changefeed's lake was fed from, checked before any
row lands by a restarted puller (cluster id, a TSO below a durable watermark, a schema version
gone back), so a restored or re-created cluster is never pulled as the same one. Owner: the
changefeed's puller.

More: docs/internals.md#upstream_identity.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from tidelake.errors import TidelakeError
from tidelake.lake.delta_read import read_delta, sql_string
from tidelake.lake.layout import LakeLayout, open_or_create

UPSTREAM_SCHEMA = pa.schema(
    [
        pa.field("changefeed", pa.string(), nullable=False),
        pa.field("cluster_id", pa.int64(), nullable=False),  # PD's cluster id (uint64, stored bit-cast)
        pa.field("first_ts", pa.int64(), nullable=False),  # the TSO the record was made at
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


class UpstreamChangedError(TidelakeError):
    """The upstream is not the cluster the lake was fed from, or it went back in time."""

    exit_code = 2


def upstream_path(layout: LakeLayout) -> str:
    return f"{layout.tidelake_root}/upstream"


def _signed(cluster_id: int) -> int:
    return cluster_id - (1 << 64) if cluster_id >= 1 << 63 else cluster_id


def recorded_cluster_id(layout: LakeLayout, changefeed: str) -> int | None:
    """The cluster id the changefeed's first run recorded; None before any record."""
    path = upstream_path(layout)
    if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
        return None
    rows = read_delta(DeltaTable(path, storage_options=layout.storage_options), ["cluster_id", "first_ts"],
                      f"changefeed = {sql_string(changefeed)}")
    if not len(rows):
        return None
    first = rows.take(pc.sort_indices(rows, [("first_ts", "ascending")]))["cluster_id"][0].as_py()
    return first & ((1 << 64) - 1)


def record_cluster_id(layout: LakeLayout, changefeed: str, cluster_id: int, ts: int) -> None:
    """Remember the upstream (appended once per changefeed; the earliest row is the one read)."""
    table = open_or_create(layout, upstream_path(layout), UPSTREAM_SCHEMA)
    row = {"changefeed": changefeed, "cluster_id": _signed(cluster_id), "first_ts": ts,
           "recorded_at": datetime.now(timezone.utc)}
    write_deltalake(table, pa.Table.from_pylist([row], schema=UPSTREAM_SCHEMA), mode="append")


def _way_out(layout: LakeLayout) -> str:
    return (f"point the changefeed at the cluster the lake at {layout.root} was fed from, or start a new "
            "changefeed in a new lake (the replicas landed so far are left as they are)")


def check_cluster(layout: LakeLayout, changefeed: str, pd_addresses: str, cluster_id: int, now_ts: int,
                  durable_ts: int) -> None:
    """Before the puller touches the upstream (not even a GC safepoint): the same cluster id as
    recorded, and a TSO not below what the lake already holds."""
    recorded = recorded_cluster_id(layout, changefeed)
    if recorded is not None and recorded != cluster_id:
        raise UpstreamChangedError(f"PD {pd_addresses} is cluster {cluster_id}, but changefeed {changefeed} was "
                                   f"fed from cluster {recorded}: {_way_out(layout)}")
    if now_ts < durable_ts:
        raise UpstreamChangedError(f"PD {pd_addresses} says now is ts {now_ts}, below ts {durable_ts} the lake "
                                   f"already holds: the cluster went back in time (restored or re-created); "
                                   f"{_way_out(layout)}")


def check_schema_version(layout: LakeLayout, cluster_id: int, ts: int, schema_version: int,
                         lake_schema_version: int | None) -> None:
    """The upstream's schema version at the resume ts is not below the one the lake recorded there."""
    if lake_schema_version is not None and schema_version < lake_schema_version:
        raise UpstreamChangedError(
            f"the upstream's schema version at ts {ts} is {schema_version}, but the lake recorded "
            f"{lake_schema_version} there: cluster {cluster_id} was wiped or restored from an older backup; "
            f"{_way_out(layout)}")


def remember_cluster(layout: LakeLayout, changefeed: str, cluster_id: int, ts: int) -> None:
    """Record the cluster id on its first sight (a lake from before this record adopts it)."""
    if recorded_cluster_id(layout, changefeed) is None:
        record_cluster_id(layout, changefeed, cluster_id, ts)
