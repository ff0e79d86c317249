"""What the puller hands downstream: committed row changes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RowChange:
    """One committed change of one key, raw as TiKV sent it (decoding happens in Spark).

    `table_id` is the physical table (or partition) id taken from the key; `old_value` is empty
    when the key did not exist before.
    """

    table_id: int
    commit_ts: int
    start_ts: int
    op: str  # 'put' | 'delete'
    key: bytes
    value: bytes
    old_value: bytes
    region_id: int

