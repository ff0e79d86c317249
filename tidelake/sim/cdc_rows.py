"""MVCC apply entries -> cdcpb Event rows, and the packing of scan rows into Events.

Row shapes follow TiKV's delegate/initializer (docs/wire.md#incremental-scan and docs/wire.md#old-value): realtime PREWRITE
carries value and old value; realtime COMMIT carries no old value and a value only when TiKV
would have stored it inline in the write record (a "short value", <= 255 bytes) - TiCDC copies
value and old value from the matching PREWRITE anyway (docs/wire.md#row-handling-per-region); ROLLBACK has commit_ts 0 and op
UNKNOWN; 1PC writes arrive as self-contained COMMITTED rows with old value.
"""

from __future__ import annotations

from collections.abc import Iterable

from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.mvcc import ApplyBatch, ApplyEntry

Row = cdcpb_pb2.Event.Row
LogType = cdcpb_pb2.Event.LogType
OpType = cdcpb_pb2.Event.Row.OpType

SHORT_VALUE_MAX_LEN = 255  # TiKV txn_types: values up to this size live in the write record
CDC_EVENT_MAX_BYTES = 32 * 1024  # docs/wire.md#incremental-scan: a new Event starts at 32 KiB of rows
MAX_SCAN_BATCH_SIZE = 1024  # TiKV's incremental scan converts rows in batches of this many

_OPS = {"put": OpType.PUT, "delete": OpType.DELETE}


def realtime_rows(batch: ApplyBatch) -> list[Row]:
    """Rows TiKV emits for one applied raft batch (docs/wire.md#realtime-rows)."""
    rows = []
    for e in batch.entries:
        if e.op == "rollback":
            rows.append(Row(start_ts=e.start_ts, type=LogType.ROLLBACK, op_type=OpType.UNKNOWN, key=e.key))
            continue
        op = _OPS.get(e.op)
        if op is None:
            continue
        if batch.kind == "prewrite":
            rows.append(Row(start_ts=e.start_ts, type=LogType.PREWRITE, op_type=op, key=e.key,
                            value=e.value, old_value=e.old_value))
        elif batch.kind == "commit":
            short = e.value if op == OpType.PUT and len(e.value) <= SHORT_VALUE_MAX_LEN else b""
            rows.append(Row(start_ts=e.start_ts, commit_ts=e.commit_ts, type=LogType.COMMIT, op_type=op,
                            key=e.key, value=short))
        elif batch.kind == "one_pc":
            rows.append(committed_row(e))
    return rows


def committed_row(e: ApplyEntry) -> Row:
    return Row(start_ts=e.start_ts, commit_ts=e.commit_ts, type=LogType.COMMITTED, op_type=_OPS[e.op],
               key=e.key, value=e.value, old_value=e.old_value)


def scan_row(e: ApplyEntry) -> Row:
    """A snapshot_delta entry: a lock (commit_ts 0) is PREWRITE, a write record COMMITTED (docs/wire.md#incremental-scan)."""
    if e.commit_ts == 0:
        return Row(start_ts=e.start_ts, type=LogType.PREWRITE, op_type=_OPS[e.op], key=e.key,
                   value=e.value, old_value=e.old_value)
    return committed_row(e)


def commit_of(committed: Row) -> Row:
    """The realtime COMMIT TiKV sends for a write record a concurrent scan also reports."""
    short = committed.value if len(committed.value) <= SHORT_VALUE_MAX_LEN else b""
    return Row(start_ts=committed.start_ts, commit_ts=committed.commit_ts, type=LogType.COMMIT,
               op_type=committed.op_type, key=committed.key, value=short)


def row_size(row: Row) -> int:
    return len(row.key) + len(row.value) + len(row.old_value)


def pack_scan_rows(rows: list[Row]) -> list[list[Row]]:
    """Scan rows + the INITIALIZED row, cut into Event-sized groups as TiKV's initializer does.

    TiKV converts each scan batch separately (`convert_to_grpc_events`), so Event boundaries
    restart at every batch; INITIALIZED (size 0) rides in the last group.
    """
    groups: list[list[Row]] = []
    batches = [rows[i : i + MAX_SCAN_BATCH_SIZE] for i in range(0, len(rows), MAX_SCAN_BATCH_SIZE)] or [[]]
    for n, batch in enumerate(batches):
        last = n == len(batches) - 1
        groups.extend(_split_by_bytes(batch + [Row(type=LogType.INITIALIZED)] if last else batch))
    return groups


def _split_by_bytes(rows: Iterable[Row]) -> list[list[Row]]:
    groups: list[list[Row]] = [[]]
    size = 0
    for row in rows:
        n = row_size(row)
        if size + n >= CDC_EVENT_MAX_BYTES:
            groups.append([])
            size = 0
        size += n
        groups[-1].append(row)
    return [g for g in groups if g]
