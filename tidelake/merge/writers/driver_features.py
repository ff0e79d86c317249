"""The Delta protocols the driver's writers write as Spark does: reader features up to
timestampNtz, writer features up to change data feed, timestampNtz and generated columns
(delta-rs computes generation expressions on write, delta-io/delta-rs
crates/core/src/operations/write/generated_columns.rs able_to_gc, and replicas have none), and
column mapping in name mode (PROTOCOL.md "Column Mapping") only for a writer whose physical
names and field ids are checked against Spark's (`column_mapping`: the window rewrite,
file_rewrite). No deletion vectors, type widening, row tracking or in-commit timestamps.
Owner: the driver's writers (delta_rs_writer.writable, file_rewrite), each window checking the
log it commits to.
"""

from __future__ import annotations

from deltalake import DeltaTable

READER_FEATURES = frozenset({"timestampNtz"})
WRITER_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "timestampNtz",
                             "generatedColumns"})
COLUMN_MAPPING_FEATURE = "columnMapping"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"  # PROTOCOL.md "Column Mapping": none, name or id
_MAPPING_READER_VERSION, _MAPPING_WRITER_VERSION = 2, 5  # the legacy versions that mean column mapping


def column_mapping_by_name(replica: DeltaTable) -> bool:
    """Whether the replica's data files store columns by physical name (column mapping, name mode)."""
    return replica.metadata().configuration.get(COLUMN_MAPPING_MODE, "none") == "name"


def driver_protocol(replica: DeltaTable, column_mapping: bool = False) -> bool:
    """Whether the replica's protocol asks nothing of a writer beyond the features above, column
    mapping in name mode included only when the writer asking (`column_mapping`) stores it."""
    protocol = replica.protocol()
    mode = replica.metadata().configuration.get(COLUMN_MAPPING_MODE, "none")
    if mode != "none" and not (column_mapping and mode == "name"):
        return False
    mapping = frozenset({COLUMN_MAPPING_FEATURE}) if column_mapping else frozenset()
    reader = protocol.min_reader_version
    if reader not in (1, 3) and not (column_mapping and reader == _MAPPING_READER_VERSION):
        return False
    if not set(protocol.reader_features or ()) <= READER_FEATURES | mapping:
        return False
    writer = protocol.min_writer_version
    if writer <= 4:  # legacy versions up to change data feed
        return True
    if writer == _MAPPING_WRITER_VERSION:
        return column_mapping
    return writer == 7 and set(protocol.writer_features or ()) <= WRITER_FEATURES | mapping
