"""A table's phase: which version in every `interval` consecutive ones gets a periodic log task
(a replica's checkpoint, delta_rs_writer.CHECKPOINT_INTERVAL; any table's expired-log cleanup,
log_cleanup.CLEANUP_INTERVAL), set by crc32 of the table's URI. Tables created together and
committed once a pass each (a follower's replicas) reach the same versions in the same pass; by
their phases, their checkpoints and cleanups spread over the interval's passes.
Owner: the lake; delta_rs_writer.checkpoint_due and log_cleanup.cleanup_due use it.

More: docs/internals.md#log_cleanup.
"""

from __future__ import annotations

import zlib


def on_phase(table_uri: str, version: int, interval: int) -> bool:
    """Whether `version` is the table's turn among every `interval` consecutive versions: exactly
    one in each, the same for every handle on the table (`table_uri` as DeltaTable.table_uri
    gives it)."""
    return (version + zlib.crc32(table_uri.encode()) % interval) % interval == 0
