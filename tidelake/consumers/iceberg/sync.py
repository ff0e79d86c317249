"""Publish the recorded syncpoints to the Iceberg catalog, oldest first: each replica of a cut
after the one its Iceberg table last published, so a run that stopped between two tables leaves
the rest at the previous syncpoint and the next run catches up. A table first published starts at
the newest syncpoint (older Delta versions may be vacuumed). Idempotent. Owner: `tidelake iceberg
sync` and the syncpoint job.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyiceberg.catalog import Catalog

from tidelake.consumers.iceberg.catalog_mark import record_catalog
from tidelake.consumers.iceberg.publish import Published, publish_replica, published_ts
from tidelake.consumers.iceberg.refusal import IcebergRefused
from tidelake.failpoints import failpoint
from tidelake.lake.layout import LakeLayout
from tidelake.syncpoint.records import read_syncpoints

ICEBERG_FAILPOINTS = ("iceberg.before_publish",)


@dataclass
class SyncReport:
    published: list[Published] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # db.table -> the one-line reason
    current: int = 0  # replicas whose Iceberg table was at the newest syncpoint already


def sync_iceberg(catalog: Catalog, layout: LakeLayout,
                 on_publish: Callable[[Published], None] = lambda _: None) -> SyncReport:
    """Publish every replica at every recorded syncpoint its Iceberg table lacks; a refused replica
    is reported and skipped, the others still published."""
    report = SyncReport()
    syncpoints = read_syncpoints(layout)
    newest = syncpoints[-1].ts if syncpoints else 0
    marks: dict[str, int] = {}
    marked = False
    for syncpoint in syncpoints:
        for replica in syncpoint.replicas:
            name = replica.qualified_name
            if name not in marks:
                marks[name] = published_ts(catalog, replica)
            if name in report.refused or syncpoint.ts <= marks[name] or (marks[name] == 0 and syncpoint.ts != newest):
                continue
            if not marked:  # before the first snapshot: maintenance must know the catalog exists
                record_catalog(catalog, layout)
                marked = True
            failpoint("iceberg.before_publish", name)
            try:
                published = publish_replica(catalog, layout, replica, syncpoint.ts)
            except IcebergRefused as exc:
                report.refused[name] = str(exc)
                continue
            if published is not None:  # None: another run published it meanwhile
                report.published.append(published)
                on_publish(published)
    report.current = sum(1 for mark in marks.values() if mark == newest)
    return report
