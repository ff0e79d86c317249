"""Which Delta versions an Iceberg v2 snapshot can show row for row: a version whose files hold a
deletion vector, or whose reader needs a Delta feature Iceberg v2 has no counterpart for, is
refused by name, never published with wrong rows. Owner: tidelake.consumers.iceberg.publish.

More: docs/operations.md#which-replicas-qualify.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable

from tidelake.errors import TidelakeError
from tidelake.lake.column_mapping import COLUMN_MAPPING_FEATURE

# Reader features whose files Iceberg v2 reads as they are (delta-io/delta PROTOCOL.md "Table
# Features"): column mapping through field ids and the name mapping, timestamp without time zone
# as Iceberg's `timestamp`; type widening and variants where tidelake.consumers.iceberg.iceberg_schema
# maps each column's types; deletion vectors while no file of the version has one; the log-only ones.
READABLE_FEATURES = frozenset({COLUMN_MAPPING_FEATURE, "timestampNtz", "typeWidening", "typeWidening-preview",
                               "variantType", "variantType-preview", "deletionVectors", "v2Checkpoint",
                               "vacuumProtocolCheck"})


class IcebergRefused(TidelakeError):
    """The replica cannot be published as Iceberg; the line names the table and the reason."""


def check_publishable(table: str, delta: DeltaTable) -> None:
    """Raise IcebergRefused unless every file of `delta` reads in Iceberg as the Delta reader reads
    it: no reader feature beyond READABLE_FEATURES, no deletion vector, no Delta partition columns
    (their values are in the log only, and tidelake partitions no replica)."""
    features = set(delta.protocol().reader_features or ())
    unknown = sorted(features - READABLE_FEATURES)
    if unknown:
        raise IcebergRefused(f"{table}: not published as Iceberg: Iceberg v2 has no counterpart for the Delta "
                             f"reader feature {unknown[0]}")
    if "deletionVectors" in features:
        marked = pa.table(delta.deletion_vectors()).num_rows
        if marked:
            raise IcebergRefused(f"{table}: not published as Iceberg: {marked} files of Delta version {delta.version()} "
                                 "have deletion vectors, rows Iceberg v2 would show (its own deletion vectors are "
                                 "an Iceberg v3 feature); a Delta OPTIMIZE or REORG ... APPLY (PURGE) removes them")
    partitions = delta.metadata().partition_columns
    if partitions:
        raise IcebergRefused(f"{table}: not published as Iceberg: Delta partition columns ({', '.join(partitions)}) "
                             "are not in its Parquet files")
