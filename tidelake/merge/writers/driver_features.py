"""The Delta protocols the driver's writers write as Spark does: reader features up to
timestampNtz, writer features up to change data feed, timestampNtz and generated columns; no
deletion vectors, column mapping, type widening, row tracking or in-commit timestamps. A
DATETIME column gives a replica timestampNtz; generatedColumns comes with every replica that
moved from legacy writer version 4 to table features (delta-rs computes generation expressions on
write, delta-io/delta-rs crates/core/src/operations/write/generated_columns.rs able_to_gc, and
replicas have none). Owner: the driver's writers (delta_rs_writer.writable, file_rewrite), each
window checking the log it commits to.
"""

from __future__ import annotations

from deltalake import DeltaTable

READER_FEATURES = frozenset({"timestampNtz"})
WRITER_FEATURES = frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "timestampNtz",
                             "generatedColumns"})


def driver_protocol(replica: DeltaTable) -> bool:
    """Whether the replica's protocol asks nothing of a writer beyond the features above."""
    protocol = replica.protocol()
    if protocol.min_reader_version not in (1, 3):  # legacy 2: column mapping
        return False
    if not set(protocol.reader_features or ()) <= READER_FEATURES:
        return False
    if protocol.min_writer_version <= 4:  # legacy versions up to change data feed
        return True
    return protocol.min_writer_version == 7 and set(protocol.writer_features or ()) <= WRITER_FEATURES
