"""What one replica's Delta log says, shared by the merge, which records it, and status, which shows
it: checkpoint, protocol, soft deletes, history.

Reading it costs a replay of the replica's log and of its history table's (a LIST and a few GETs
each on an object store), so status of many replicas cannot afford it for every replica. The
merge reads it once per table at the end of the table's part of a run and records it in the merge
log (tidelake.merge.merge_log); status takes it from there (tidelake.status.status_report says when
it cannot). Owner: the merge records it (tidelake.merge.merge_log); status reads that record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pyarrow as pa
from deltalake import DeltaTable

from tidelake.lake.checkpoint import MERGE_APP_ID, open_replica
from tidelake.lake.history_table import (
    HISTORY_APP_ID,
    SINCE_PROPERTY,
    SOFT_DELETES_PROPERTY,
    history_path,
)
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_readers import ReaderNeeds, reader_needs

# The merge log's `replica` column (one struct, null when the run could not read the replica).
REPLICA_FACTS_TYPE = pa.struct([
    pa.field("path", pa.string(), nullable=False),
    pa.field("checkpoint", pa.int64()),
    pa.field("reader_version", pa.int32(), nullable=False),
    pa.field("reader_features", pa.list_(pa.string()), nullable=False),
    pa.field("soft_deletes", pa.bool_(), nullable=False),
    pa.field("history", pa.bool_(), nullable=False),
    pa.field("history_checkpoint", pa.int64()),
    pa.field("history_since", pa.int64()),
])


@dataclass(frozen=True)
class ReplicaFacts:
    """The replica at `path` as of one read. `history`: it has a history table (docs/history.md), which holds every change up to `history_checkpoint` and from `history_since`."""

    path: str
    checkpoint: int | None
    reader_version: int
    reader_features: tuple[str, ...]
    soft_deletes: bool
    history: bool
    history_checkpoint: int | None
    history_since: int | None

    @property
    def reader_needs(self) -> ReaderNeeds:
        return ReaderNeeds(self.reader_version, self.reader_features)

    def to_row(self) -> dict:
        return {**asdict(self), "reader_features": list(self.reader_features)}

    @classmethod
    def from_row(cls, row: dict | None) -> ReplicaFacts | None:
        if row is None:
            return None
        return cls(**{**row, "reader_features": tuple(row["reader_features"])})


def read_replica_facts(layout: LakeLayout, path: str) -> ReplicaFacts | None:
    """The facts of the replica at `path` read from its Delta log (one replay), None when there is no
    replica there."""
    replica = open_replica(path, layout.storage_options)
    return None if replica is None else replica_facts(layout, path, replica)


def replica_facts(layout: LakeLayout, path: str, replica: DeltaTable, checkpoint: int | None = None) -> ReplicaFacts:
    """The facts of the replica at `path` from `replica`, its log as the caller loaded it (the merge
    brings its run's handle up to date first), and its history table's log. `checkpoint`: the one
    recorded as of `replica`'s version when the caller knows it (else read from `replica`)."""
    needs = reader_needs(replica)
    history = open_replica(history_path(layout, path), layout.storage_options)
    since = None if history is None else history.metadata().configuration.get(SINCE_PROPERTY)
    return ReplicaFacts(
        path=path,
        checkpoint=checkpoint if checkpoint is not None else replica.transaction_version(MERGE_APP_ID),
        reader_version=needs.reader_version,
        reader_features=needs.features,
        soft_deletes=replica.metadata().configuration.get(SOFT_DELETES_PROPERTY) == "true",
        history=history is not None,
        history_checkpoint=None if history is None else history.transaction_version(HISTORY_APP_ID),
        history_since=int(since) if since else None,
    )
