"""Publish one replica's Delta version as one Iceberg snapshot: the Iceberg table's schema becomes
the version's (tidelake.consumers.iceberg.iceberg_schema), the files it lacks are added and the files the
version no longer holds removed, the snapshot is tagged `syncpoint-<ts>` and the table marks `ts`
as published, all in one catalog commit: a crash leaves the table at its previous syncpoint.
Owner: tidelake.consumers.iceberg.sync.

More: docs/operations.md#reading-replicas-as-iceberg.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from deltalake import DeltaTable
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.update.snapshot import ManageSnapshots

from tidelake.consumers.iceberg.data_files import delta_data_files
from tidelake.consumers.iceberg.iceberg_schema import has_column_mapping, iceberg_schema, name_mapping
from tidelake.consumers.iceberg.refusal import IcebergRefused, check_publishable
from tidelake.consumers.iceberg.set_schema import SetSchema
from tidelake.errors import EXIT_TRY_LATER, TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.syncpoint.records import ReplicaAt

PUBLISHED_TS = "tidelake.syncpoint-ts"  # table property: the newest syncpoint published
DELTA_VERSION = "tidelake.delta-version"  # snapshot summary: the Delta version it shows
# table property: the replica's Delta table at the newest publish; snapshot summary: the Delta
# table it shows (a table dropped and created again upstream is a new replica at a new path)
DELTA_TABLE = "tidelake.delta-table"
# table property: whether field ids are Delta's column mapping ids or given by name (iceberg_schema)
ID_SOURCE = "tidelake.field-ids"
NAME_MAPPING = "schema.name-mapping.default"  # Iceberg spec "Column Projection"
# Iceberg spec "Table Properties": snapshot expiry and orphan-file removal must never delete a
# data file: the files are the replica's, Delta's VACUUM owns them.
TABLE_PROPERTIES = {"gc.enabled": "false", "format-version": "2"}


TAG_PREFIX = "syncpoint-"


def syncpoint_tag(ts: int) -> str:
    return f"{TAG_PREFIX}{ts}"


class PublishRace(TidelakeError):
    """Another publisher changed the Iceberg table since it was read: nothing was committed."""

    exit_code = EXIT_TRY_LATER


@dataclass(frozen=True)
class Published:
    table: str
    ts: int
    delta_version: int
    snapshot_id: int
    added: int  # data files
    removed: int

    def line(self) -> str:
        return (f"{self.table}: Delta version {self.delta_version} -> Iceberg snapshot {self.snapshot_id} "
                f"({syncpoint_tag(self.ts)}, +{self.added} -{self.removed} files)")


def lake_tables(catalog: Catalog, layout: LakeLayout) -> Iterator[Table]:
    """The Iceberg tables of `catalog` that show a replica of this lake (a catalog may hold other
    lakes' tables, and tables tidelake did not publish)."""
    root = layout.root.rstrip("/") + "/"
    for namespace in catalog.list_namespaces():
        for identifier in catalog.list_tables(namespace):
            table = catalog.load_table(identifier)
            if table.properties.get(DELTA_TABLE, "").startswith(root):
                yield table


def published_ts(catalog: Catalog, replica: ReplicaAt) -> int:
    """The newest syncpoint published to the replica's Iceberg table; 0 before the first."""
    try:
        return int(catalog.load_table((replica.db, replica.name)).properties.get(PUBLISHED_TS, 0))
    except NoSuchTableError:
        return 0


def _create_table(catalog: Catalog, replica: ReplicaAt) -> Table:
    """The Iceberg table `db.name` of the replica, empty and without columns (publish_replica adds
    its schema with the ids it needs), its metadata under the lake's _tidelake/iceberg folder,
    never in the replica's own folder (Delta's VACUUM would delete it)."""
    catalog.create_namespace_if_not_exists(replica.db)
    location = f"{catalog.properties['warehouse']}/{replica.db}/{replica.name}"
    return catalog.create_table_if_not_exists((replica.db, replica.name), Schema(), location=location,
                                              properties={**TABLE_PROPERTIES, DELTA_TABLE: replica.path})


def publish_replica(catalog: Catalog, layout: LakeLayout, replica: ReplicaAt, ts: int) -> Published | None:
    """Make Delta version `replica.version` the Iceberg snapshot of syncpoint `ts`; None when `ts`
    (or a later syncpoint) is published already. IcebergRefused when the version cannot be shown
    row for row; a commit another publisher won is a TidelakeError to retry (exit 75)."""
    delta = DeltaTable(replica.path, version=replica.version, storage_options=layout.storage_options)
    check_publishable(replica.qualified_name, delta)
    identifier = (replica.db, replica.name)
    found = catalog.load_table(identifier) if catalog.table_exists(identifier) else None
    if found is not None and int(found.properties.get(PUBLISHED_TS, 0)) >= ts:
        return None
    ids = "column-mapping" if has_column_mapping(delta) else "by-name"
    if found is not None and found.properties.get(ID_SOURCE, ids) != ids:
        raise IcebergRefused(f"{replica.qualified_name}: not published as Iceberg: its field ids were published "
                             f"{found.properties[ID_SOURCE]} and the replica now has {ids} ids (column mapping "
                             "changed); drop its Iceberg table to publish it anew")
    history, last_column_id = (found.metadata.schemas, found.metadata.last_column_id) if found is not None else ([], 0)
    schema = iceberg_schema(replica.qualified_name, delta, history, last_column_id)
    table = found or _create_table(catalog, replica)  # created once nothing refuses the version
    metadata = table.metadata
    files = delta_data_files(delta, replica.path, table.io)
    snapshot = table.current_snapshot()
    held = {task.file.file_path: task.file for task in table.scan().plan_files()} if snapshot is not None else {}
    added = [files[uri] for uri in sorted(files.keys() - held.keys())]
    removed = [held[uri] for uri in sorted(held.keys() - files.keys())]
    schema_changed = metadata.schema().fields != schema.fields
    moved = found is not None and found.properties.get(DELTA_TABLE) != replica.path  # created anew upstream

    tx = table.transaction()
    if schema_changed:
        SetSchema(tx, schema).commit()
    mapping = name_mapping(delta, schema, table.name_mapping())
    tx.set_properties({NAME_MAPPING: mapping.model_dump_json(), PUBLISHED_TS: str(ts), ID_SOURCE: ids,
                       DELTA_TABLE: replica.path})
    if snapshot is None or added or removed or schema_changed or moved:
        summary = {PUBLISHED_TS: str(ts), DELTA_VERSION: str(replica.version), DELTA_TABLE: replica.path}
        update = tx.update_snapshot(snapshot_properties=summary)
        with (update.overwrite() if removed else update.fast_append()) as change:
            for data_file in removed:
                change.delete_data_file(data_file)
            for data_file in added:
                change.append_data_file(data_file)
    snapshot_id = tx.table_metadata.current_snapshot_id
    ManageSnapshots(tx).create_tag(snapshot_id, syncpoint_tag(ts)).commit()
    try:
        tx.commit_transaction()
    except CommitFailedException as exc:
        raise PublishRace(f"{replica.qualified_name}: another publisher committed to its Iceberg table first "
                          f"({exc}); run the sync again") from exc
    return Published(replica.qualified_name, ts, replica.version, snapshot_id, len(added), len(removed))
