"""Where a replica's SCD type 2 history table lives and how far it got, shared by the merge, which
writes it (tidelake.merge.scd2_history), maintenance, status and verify; read without Spark: at
`<lake>/_tidelake/history/<the replica's folder>`, following the replica's folder, with its own
checkpoint as the txn of HISTORY_APP_ID.
Owner: the merge writes it (tidelake.merge.scd2_history); the others read it here.

More: docs/internals.md#history_table.
"""

from __future__ import annotations

from tidelake.errors import InputError
from tidelake.lake.checkpoint import open_replica, read_checkpoint
from tidelake.lake.layout import LakeLayout

HISTORY_APP_ID = "tidelake-history"
HISTORY_DIR = "history"
SINCE_PROPERTY = "tidelake.history.since"
# Set on a replica once soft deletes are on (tidelake.merge.soft_deletes); status reads it.
SOFT_DELETES_PROPERTY = "tidelake.softDeletes"


def history_path(layout: LakeLayout, replica_path: str) -> str:
    """The history table of the replica at `replica_path` (a folder below the lake root)."""
    prefix = layout.root + "/"
    if not replica_path.startswith(prefix):
        raise InputError(f"replica {replica_path} is not below the lake root {layout.root}: no history path for it")
    return f"{layout.tidelake_root}/{HISTORY_DIR}/{replica_path[len(prefix):]}"


def history_checkpoint(path: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The TSO up to which the history table at `path` holds every change; None when there is none."""
    return read_checkpoint(path, storage_options, app_id=HISTORY_APP_ID)


def history_since(path: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The checkpoint the history table was created at; None when there is no history table."""
    table = open_replica(path, storage_options)
    if table is None:
        return None
    raw = table.metadata().configuration.get(SINCE_PROPERTY)
    return int(raw) if raw else None
