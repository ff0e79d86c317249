"""What an Iceberg catalog shows of the published replicas: per table its newest published
syncpoint, the snapshot tagged there and when the table was last committed to. Read only.
Owner: the Replication page (tidelake.orchestration.page_report).

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from pyiceberg.catalog import Catalog

from tidelake.consumers.iceberg.publish import DELTA_TABLE, PUBLISHED_TS, syncpoint_tag


def last_snapshots(catalog: Catalog) -> list[dict[str, Any]]:
    """One entry per table tidelake published, by name: `table`, `syncpoint_ts`, `snapshot_id` (the
    snapshot its tag points at) and `published_at` (ISO UTC of the table's last commit)."""
    out = []
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            table = catalog.load_table(identifier)
            if DELTA_TABLE not in table.properties:  # not published by tidelake
                continue
            ts = int(table.properties.get(PUBLISHED_TS, 0))
            ref = table.refs().get(syncpoint_tag(ts))
            updated = datetime.fromtimestamp(table.metadata.last_updated_ms / 1000, timezone.utc)
            out.append({"table": ".".join(identifier[-2:]), "syncpoint_ts": ts,
                        "snapshot_id": ref.snapshot_id if ref is not None else None,
                        "published_at": updated.isoformat()})
    return sorted(out, key=lambda entry: entry["table"])
