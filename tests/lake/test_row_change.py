"""The memory the lander's quota counts for buffered rows, against what Python really allocates."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from tidelake.errors import InputError
from tidelake.kvproto import cdcpb_pb2
from tidelake.lake.row_change import OP_DELETE, OP_PUT, ROW_OVERHEAD_BYTES, RowChange, check_ops, memory_bytes


def _rows_as_the_feed_builds_them(n: int, value_bytes: int) -> tuple[list[cdcpb_pb2.Event.Row], int]:
    events = [cdcpb_pb2.Event.Row(start_ts=(1 << 40) + i, commit_ts=(1 << 40) + i + 1,
                                  key=b"t\x80\x00\x00\x00\x00\x00\x00\x2a_r" + i.to_bytes(8, "big"),
                                  value=os.urandom(value_bytes), old_value=os.urandom(value_bytes // 2))
              for i in range(n)]
    return events, sum(len(e.key) + len(e.value) + len(e.old_value) for e in events)


def test_memory_bytes_is_payload_plus_the_overhead_per_row():
    rows = [RowChange(42, 10, 9, "put", b"k" * 19, b"v" * 100, b"", 7)] * 3
    assert memory_bytes(rows) == 3 * (ROW_OVERHEAD_BYTES + 19 + 100)
    assert memory_bytes([]) == 0


def test_memory_bytes_covers_what_python_allocates_for_buffered_rows():
    """Built from protobuf rows, as the region state machine builds them (new bytes objects).
    Counting less than Python allocates lets a full quota hold more than its size; counting
    far more would stall the feed early."""
    for value_bytes in (0, 60, 470):
        events, _ = _rows_as_the_feed_builds_them(2000, value_bytes)
        tracemalloc.start()
        try:
            rows = [RowChange(4242, e.commit_ts, e.start_ts, "put", e.key, e.value, e.old_value, 123456)
                    for e in events]
            allocated, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        counted = memory_bytes(rows)
        assert allocated <= counted <= 1.5 * allocated, (value_bytes, allocated, counted)


def test_check_ops_takes_put_and_delete_and_names_the_table_of_anything_else():
    check_ops([RowChange(7, 2, 1, op, b"k", b"", b"", 1) for op in (OP_PUT, OP_DELETE)])
    with pytest.raises(InputError, match="row change of table 7 has op 'lock', not put/delete"):
        check_ops([RowChange(7, 2, 1, OP_PUT, b"k", b"", b"", 1), RowChange(7, 3, 2, "lock", b"k", b"", b"", 1)])
