"""Vacuum of the lake's control tables rewritten in place (the watermarks on every flush, the
replica catalog and DDL log by MERGE, the announced asset states, the table starts, the upstream
identity): each rewrite leaves the replaced file on the store, so without a VACUUM their folders
grow by a file per flush forever. delta-rs only, as for the changelog (pullers and merges write
them meanwhile); each table at its own deleted-file retention (docs/design.md#lake-layout).
Owner: tidelake.maintenance.lake_upkeep.

More: docs/internals.md#control_upkeep.
"""

from __future__ import annotations

from deltalake import DeltaTable

from tidelake.capture.changefeed.upstream_identity import upstream_path
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import catalog_path
from tidelake.lake.table_starts import table_starts_path


def rewritten_control_tables(layout: LakeLayout) -> list[str]:
    """The control tables whose writers replace files (the others only append)."""
    return [layout.watermarks, layout.ddl, catalog_path(layout), layout.announced, table_starts_path(layout),
            upstream_path(layout)]


def vacuum_control_tables(layout: LakeLayout) -> dict[str, int]:
    """Vacuum each rewritten control table that exists; path -> files deleted."""
    deleted = {}
    for path in rewritten_control_tables(layout):
        if not DeltaTable.is_deltatable(path, storage_options=layout.storage_options):
            continue
        table = DeltaTable(path, storage_options=layout.storage_options)
        # full: the tombstones of files removed longer ago than the retention leave the log at its
        # next checkpoint, so a vacuum of the listed tombstones alone would miss almost all of them
        deleted[path] = len(table.vacuum(dry_run=False, full=True))
    return deleted
