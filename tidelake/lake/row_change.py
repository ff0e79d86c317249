"""What the puller hands downstream: committed row changes.
Owner: the EventFeed client makes them, the lander lands them; the merge reads their op codes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tidelake.errors import InputError

# The two ops of a committed change, as the changelog's `op` column holds them.
OP_PUT = "put"
OP_DELETE = "delete"


@dataclass(slots=True)
class RowChange:
    """One committed change of one key, raw as TiKV sent it (decoding happens in Spark).

    `table_id` is the physical table (or partition) id taken from the key; `old_value` is empty
    when the key did not exist before.
    """

    table_id: int
    commit_ts: int
    start_ts: int
    op: str  # OP_PUT | OP_DELETE
    key: bytes
    value: bytes
    old_value: bytes
    region_id: int


def check_ops(rows: Iterable[RowChange]) -> None:
    """Reject an op the merge could not apply; the lander checks each row once, as it buffers it."""
    for r in rows:
        if r.op not in (OP_PUT, OP_DELETE):
            raise InputError(f"row change of table {r.table_id} has op {r.op!r}, not put/delete")


# What one buffered RowChange costs beyond its key, value and old value bytes: the slotted
# object, its four ints, three bytes headers and a list slot, with the allocator's rounding
# (tracemalloc and the RSS per row agree with it; docs/internals.md#lander).
ROW_OVERHEAD_BYTES = 300


def memory_bytes(rows: Iterable[RowChange]) -> int:
    """Memory that holding `rows` takes: what the lander's memory quota counts. Counting only the
    key and value bytes let a quota of small rows hold twice its size."""
    return sum(ROW_OVERHEAD_BYTES + len(r.key) + len(r.value) + len(r.old_value) for r in rows)
