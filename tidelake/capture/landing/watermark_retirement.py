"""Which physical ids' watermark rows no merge can need any more, so a puller may drop them: an id
retired by a DDL once every table that held it has a replica checkpoint at or past that DDL (or
was dropped). Anything unknown keeps the rows: keeping is always safe. Owner: the lander.

More: docs/internals.md#watermark_retirement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from deltalake import DeltaTable

from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import (
    ReplicaCatalog,
    ReplicaEntry,
    ReplicaState,
    catalog_path,
)
from tidelake.lake.schema_history import SchemaHistory, TableKey


def _retired_at(history: SchemaHistory, table: TableKey, physical_id: int) -> int | None:
    """Commit ts of the DDL that last removed `physical_id` from `table`; None if it still has it."""
    events = history.ddl_events(table)
    if physical_id in events[-1].physical_ids_after:
        return None
    removals = [e.commit_ts for e in events if physical_id in e.removed_physical_ids]
    return max(removals) if removals else None


def _done_with(
    history: SchemaHistory,
    replicas: Mapping[int, ReplicaEntry],
    checkpoint_of: Callable[[str], int | None],
    table: TableKey,
    physical_id: int,
) -> bool:
    """Whether no merge of `table` can still plan with `physical_id`."""
    retired_at = _retired_at(history, table, physical_id)
    entry = replicas.get(table)
    if retired_at is None or entry is None:
        return False
    if entry.state == ReplicaState.DROPPED:
        return True
    checkpoint = checkpoint_of(entry.path)
    return checkpoint is not None and checkpoint >= retired_at


def retired_ids(
    history: SchemaHistory,
    replicas: Mapping[int, ReplicaEntry],
    checkpoint_of: Callable[[str], int | None],
    candidates: Iterable[int],
) -> set[int]:
    """The ids among `candidates` that every table which ever held them is done with."""
    wanted = set(candidates)
    holders: dict[int, list[TableKey]] = {}
    for table in history.tables():
        for physical_id in wanted.intersection(history.all_physical_ids(table)):
            holders.setdefault(physical_id, []).append(table)
    return {
        physical_id
        for physical_id, tables in holders.items()
        if all(_done_with(history, replicas, checkpoint_of, t, physical_id) for t in tables)
    }


def retired_watermark_ids(layout: LakeLayout, candidates: Iterable[int]) -> set[int]:
    """`retired_ids` against the lake's DDL history, replica catalog and replica checkpoints."""
    wanted = set(candidates)
    if not wanted or not DeltaTable.is_deltatable(catalog_path(layout), storage_options=layout.storage_options):
        return set()
    history = SchemaHistory.load(layout)
    replicas = ReplicaCatalog(layout).entries()
    checkpoints: dict[str, int | None] = {}  # one log replay per replica, not per partition

    def checkpoint_of(path: str) -> int | None:
        if path not in checkpoints:
            checkpoints[path] = read_checkpoint(path, layout.storage_options)
        return checkpoints[path]

    return retired_ids(history, replicas, checkpoint_of, wanted)
