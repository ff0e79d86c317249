"""Which Delta reader features a replica requires, shared through replica_facts by the merge and
status, and whether the installed deltalake can read it, asked from deltalake's own supported
versions and features (delta-io/delta PROTOCOL.md "Table Features").
Owner: replica_facts, for the merge and status.

More: docs/internals.md#replica_readers.
"""

from __future__ import annotations

from dataclasses import dataclass

from deltalake import DeltaTable
from deltalake.table import MAX_SUPPORTED_READER_VERSION, SUPPORTED_READER_FEATURES

from tidelake.lake.column_mapping import COLUMN_MAPPING_FEATURE, LEGACY_MAPPING_READER_VERSION


@dataclass(frozen=True)
class ReaderNeeds:
    reader_version: int
    features: tuple[str, ...]  # reader features the replica requires, sorted

    @property
    def deltalake_unsupported(self) -> tuple[str, ...]:
        """The required features the installed deltalake cannot read (empty: it reads the replica)."""
        if self.reader_version > MAX_SUPPORTED_READER_VERSION:
            return (f"readerVersion {self.reader_version}",)
        return tuple(f for f in self.features if f not in SUPPORTED_READER_FEATURES)

    @property
    def deltalake_readable(self) -> bool:
        return not self.deltalake_unsupported


def reader_needs(replica: str | DeltaTable, storage_options: dict[str, str] | None = None) -> ReaderNeeds:
    """The reader side of the replica's current protocol (read from its Delta log, no data
    files); pass an open DeltaTable to avoid replaying the log again."""
    table = replica if isinstance(replica, DeltaTable) else DeltaTable(replica, storage_options=storage_options)
    protocol = table.protocol()
    version = protocol.min_reader_version
    if version == LEGACY_MAPPING_READER_VERSION:
        features: list[str] = [COLUMN_MAPPING_FEATURE]
    else:
        features = list(protocol.reader_features or [])
    return ReaderNeeds(version, tuple(sorted(features)))
