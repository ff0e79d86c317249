"""How long the replicas' Iceberg snapshots stay readable ([iceberg].retention, counted from the
syncpoint's TSO): older `syncpoint-<ts>` tags are removed and the snapshots no tag or branch
points at any more are expired, metadata only (pyiceberg's expiry deletes no file; the tables
have gc.enabled=false). Every snapshot left holds its Delta version's files against the
replica's VACUUM (tidelake.maintenance.vacuum_hold); the current snapshot is never expired,
however old. Owner: `tidelake maintenance` and the maintenance job, before VACUUM.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.update.snapshot import ExpireSnapshots, ManageSnapshots

from tidelake import tso
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.catalog_mark import mark_path, recorded_catalog
from tidelake.consumers.iceberg.iceberg_catalog import existing_catalog
from tidelake.consumers.iceberg.publish import DELTA_TABLE, DELTA_VERSION, TAG_PREFIX, lake_tables
from tidelake.errors import InputError
from tidelake.lake.layout import LakeLayout
from tidelake.maintenance.vacuum_hold import VacuumHold

_log = logging.getLogger(__name__)


@dataclass
class IcebergRetention:
    holds: dict[str, VacuumHold] = field(default_factory=dict)  # replica path -> its oldest snapshot's version
    expired: list[str] = field(default_factory=list)  # "db.table syncpoint-<ts>" of every tag removed


def lake_retention(layout: LakeLayout, config: IcebergConfig) -> IcebergRetention:
    """keep_readable over the lake's catalog now; nothing when nothing was published to one.
    InputError when the lake records a catalog that `config` does not name (VACUUM would be
    unguarded)."""
    catalog = existing_catalog(layout, config)
    if catalog is None:
        recorded = recorded_catalog(layout)
        if recorded is not None:
            raise InputError(f"{layout.root}: its replicas are published as Iceberg to the catalog {recorded} "
                             f"({mark_path(layout)}), which no [iceberg].catalog_uri names here: vacuuming without "
                             "it could delete files its snapshots list; pass --config with that catalog, or --skip vacuum")
        return IcebergRetention()
    return keep_readable(catalog, layout, config.retention_s, time.time_ns() // 1_000_000)


def keep_readable(catalog: Catalog, layout: LakeLayout, retention_s: float, now_ms: int) -> IcebergRetention:
    """Expire what is older than the retention in every table of `catalog` that shows a replica of
    the lake, then hold the oldest Delta version each table's remaining snapshots show. A table
    another writer committed to meanwhile is left unexpired for the next run, and holds all it has."""
    out = IcebergRetention()
    cutoff_ms = now_ms - retention_s * 1000
    for table in lake_tables(catalog, layout):
        table = _expire(catalog, table, cutoff_ms, out.expired)
        for path, hold in _oldest(table).items():
            kept = out.holds.get(path)
            if kept is None or hold.version < kept.version:
                out.holds[path] = hold
    return out


def _expire(catalog: Catalog, table: Table, cutoff_ms: float, expired: list[str]) -> Table:
    name = ".".join(table.name()[-2:])
    current = table.metadata.current_snapshot_id
    old = [tag for tag, ref in table.refs().items()
           if ref.snapshot_ref_type == SnapshotRefType.TAG and tag.startswith(TAG_PREFIX) and ref.snapshot_id != current
           and tso.physical_ms(int(tag.removeprefix(TAG_PREFIX))) < cutoff_ms]
    kept = {ref.snapshot_id for tag, ref in table.refs().items() if tag not in old} | {current}
    unreferenced = [s.snapshot_id for s in table.snapshots() if s.snapshot_id not in kept]
    if not old and not unreferenced:
        return table
    tx = table.transaction()
    tags = ManageSnapshots(tx)
    for tag in old:
        tags.remove_tag(tag)
    tags.commit()
    if unreferenced:  # none when an expired tag shared its snapshot with a newer one
        ExpireSnapshots(tx).by_ids(unreferenced).commit()
    try:
        tx.commit_transaction()
    except CommitFailedException as exc:
        _log.warning("%s: Iceberg snapshot expiry lost a commit race, left for the next run: %s", name, exc)
        return catalog.load_table(table.name())
    expired += [f"{name} {tag}" for tag in old]
    return table


def _oldest(table: Table) -> dict[str, VacuumHold]:
    """Per Delta table the snapshots show (of the current one and those a ref points at), the one
    showing its oldest version. A snapshot names its Delta table in its summary; one published
    before summaries did shows the table's (then only) one."""
    tags = {ref.snapshot_id: tag for tag, ref in table.refs().items() if ref.snapshot_ref_type == SnapshotRefType.TAG}
    ids = {ref.snapshot_id for ref in table.refs().values()} | ({table.metadata.current_snapshot_id} - {None})
    oldest: dict[str, tuple[int, int]] = {}
    for snapshot in table.snapshots():
        if snapshot.snapshot_id not in ids:
            continue
        summary = snapshot.summary
        path = (summary.get(DELTA_TABLE) if summary else None) or table.properties[DELTA_TABLE]
        held = (int(summary.get(DELTA_VERSION, 0)) if summary else 0, snapshot.snapshot_id)
        oldest[path] = min(oldest.get(path, held), held)
    name = ".".join(table.name()[-2:])
    return {path: VacuumHold(version, f"Iceberg snapshot {snapshot_id}"
                             f"{f' ({tags[snapshot_id]})' if snapshot_id in tags else ''} of {name}")
            for path, (version, snapshot_id) in oldest.items()}
