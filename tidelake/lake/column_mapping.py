"""Delta column mapping's names, spelled once (delta-io/delta PROTOCOL.md "Column Mapping"): the
table property that turns it on and its modes, the field metadata holding a column's physical
name and id, the table feature, and the legacy protocol versions that mean it. A table without
the property maps no column. Owner: the lake; read by replica_readers, the merge's replica
schema and driver writers, and the Iceberg consumer.
"""

from __future__ import annotations

COLUMN_MAPPING_FEATURE = "columnMapping"  # the reader and writer table feature
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"  # the table property: none, name or id
NONE_MODE, NAME_MODE = "none", "name"
PHYSICAL_NAME = "delta.columnMapping.physicalName"  # field metadata: the column's name in Parquet files
FIELD_ID = "delta.columnMapping.id"  # field metadata: the column's Parquet field id
# The protocol versions that mean column mapping on a table without table features.
LEGACY_MAPPING_READER_VERSION, LEGACY_MAPPING_WRITER_VERSION = 2, 5


def mapping_mode(configuration: dict[str, str]) -> str:
    """The column mapping mode of a table with properties `configuration`: none when unset."""
    return configuration.get(COLUMN_MAPPING_MODE, NONE_MODE)
