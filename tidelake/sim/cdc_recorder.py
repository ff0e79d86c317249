"""Stream recorder: every ChangeDataEvent one store sends, for replay (SIM-FRONT's replay mode).

File format (one file per store, append-only, big-endian):

    magic   8 bytes  b"TLCDCREC"
    version u16      1
    records until EOF, each:
        kind     u8   1 OPEN, 2 REQUEST, 3 EVENT, 4 CLOSE
        conn_id  u64  stream id, unique within the file
        unix_ms  u64  wall-clock time the record was written
        length   u32  payload length
        payload  `length` bytes:
            OPEN     UTF-8 JSON {"store_id": int, "method": "EventFeed"|"EventFeedV2",
                     "features": [str], "peer": str}
            REQUEST  serialized cdcpb.ChangeDataRequest as received (maps request_id to
                     region_id, epoch, checkpoint_ts and the encoded span)
            EVENT    serialized cdcpb.ChangeDataEvent exactly as sent on the wire
            CLOSE    UTF-8 final status of the stream ("OK", or "<CODE>: <details>")

Events carry `request_id` (multiplexed streams) or 0 in ResolvedTs (plain streams); a plain
stream's subscription is identified by its conn_id and the REQUEST records of that conn.
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from tidelake.errors import InputError

MAGIC = b"TLCDCREC"
VERSION = 1
_FILE_HEADER = struct.Struct(">8sH")
_RECORD_HEADER = struct.Struct(">BQQI")


class RecordKind(IntEnum):
    OPEN = 1
    REQUEST = 2
    EVENT = 3
    CLOSE = 4


@dataclass(frozen=True)
class Record:
    kind: RecordKind
    conn_id: int
    unix_ms: int
    payload: bytes


class StreamRecorder:
    """Appends records from many stream threads; each record is flushed whole."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._file = open(path, "ab")  # noqa: SIM115 - closed by close()
        if self._file.tell() == 0:
            self._file.write(_FILE_HEADER.pack(MAGIC, VERSION))
            self._file.flush()

    def open_stream(self, conn_id: int, store_id: int, method: str, features: tuple[str, ...], peer: str) -> None:
        info = {"store_id": store_id, "method": method, "features": list(features), "peer": peer}
        self._write(RecordKind.OPEN, conn_id, json.dumps(info).encode())

    def request(self, conn_id: int, serialized: bytes) -> None:
        self._write(RecordKind.REQUEST, conn_id, serialized)

    def event(self, conn_id: int, serialized: bytes) -> None:
        self._write(RecordKind.EVENT, conn_id, serialized)

    def close_stream(self, conn_id: int, status: str) -> None:
        self._write(RecordKind.CLOSE, conn_id, status.encode())

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _write(self, kind: RecordKind, conn_id: int, payload: bytes) -> None:
        header = _RECORD_HEADER.pack(kind, conn_id, int(time.time() * 1000), len(payload))
        with self._lock:
            if self._file.closed:
                return
            self._file.write(header + payload)
            self._file.flush()


def read_records(path: str | Path) -> Iterator[Record]:
    """Records in file order; a record cut short by a crash ends the iteration."""
    with open(path, "rb") as f:
        head = f.read(_FILE_HEADER.size)
        if len(head) < _FILE_HEADER.size:
            return
        magic, version = _FILE_HEADER.unpack(head)
        if magic != MAGIC or version != VERSION:
            raise InputError(f"{path}: not a tidelake CDC stream recording (magic {magic!r}, version {version})")
        while True:
            header = f.read(_RECORD_HEADER.size)
            if len(header) < _RECORD_HEADER.size:
                return
            kind, conn_id, unix_ms, length = _RECORD_HEADER.unpack(header)
            payload = f.read(length)
            if len(payload) < length:
                return
            try:
                record_kind = RecordKind(kind)
            except ValueError:
                raise InputError(f"{path}: unknown record kind {kind} at byte {f.tell() - length - _RECORD_HEADER.size}") from None
            yield Record(record_kind, conn_id, unix_ms, payload)
