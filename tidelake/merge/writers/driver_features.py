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

from tidelake.lake.column_mapping import (
    COLUMN_MAPPING_FEATURE,
    LEGACY_MAPPING_READER_VERSION,
    LEGACY_MAPPING_WRITER_VERSION,
    NAME_MODE,
    NONE_MODE,
    mapping_mode,
)

READER_FEATURES = frozenset({"timestampNtz"})
WRITER_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "timestampNtz",
                             "generatedColumns"})


def column_mapping_by_name(replica: DeltaTable) -> bool:
    """Whether the replica's data files store columns by physical name (column mapping, name mode)."""
    return mapping_mode(replica.metadata().configuration) == NAME_MODE


def driver_protocol(replica: DeltaTable, column_mapping: bool = False) -> bool:
    """Whether the replica's protocol asks nothing of a writer beyond the features above, column
    mapping in name mode included only when the writer asking (`column_mapping`) stores it."""
    protocol = replica.protocol()
    mode = mapping_mode(replica.metadata().configuration)
    if mode != NONE_MODE and not (column_mapping and mode == NAME_MODE):
        return False
    mapping = frozenset({COLUMN_MAPPING_FEATURE}) if column_mapping else frozenset()
    reader = protocol.min_reader_version
    if reader not in (1, 3) and not (column_mapping and reader == LEGACY_MAPPING_READER_VERSION):
        return False
    if not set(protocol.reader_features or ()) <= READER_FEATURES | mapping:
        return False
    writer = protocol.min_writer_version
    if writer <= 4:  # legacy versions up to change data feed
        return True
    if writer == LEGACY_MAPPING_WRITER_VERSION:
        return column_mapping
    return writer == 7 and set(protocol.writer_features or ()) <= WRITER_FEATURES | mapping
