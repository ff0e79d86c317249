"""What an Iceberg catalog shows of the published replicas: per table its newest published
syncpoint, the snapshot tagged there and when the table was last committed to. Read only.
Owner: the Replication page (tidelake.orchestration.page_report).

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pyiceberg.catalog import Catalog

from tidelake.consumers.iceberg.publish import PUBLISHED_TS, lake_tables, syncpoint_tag
from tidelake.lake.layout import LakeLayout


def last_snapshots(catalog: Catalog, layout: LakeLayout) -> list[dict[str, Any]]:
    """One entry per table showing a replica of the lake, by name: `table`, `syncpoint_ts`,
    `snapshot_id` (the snapshot its tag points at) and `published_at` (ISO UTC of the table's last
    commit)."""
    out = []
    for table in lake_tables(catalog, layout):
        ts = int(table.properties.get(PUBLISHED_TS, 0))
        ref = table.refs().get(syncpoint_tag(ts))
        updated = datetime.fromtimestamp(table.metadata.last_updated_ms / 1000, timezone.utc)
        out.append({"table": ".".join(table.name()[-2:]), "syncpoint_ts": ts,
                    "snapshot_id": ref.snapshot_id if ref is not None else None, "published_at": updated.isoformat()})
    return sorted(out, key=lambda entry: entry["table"])
