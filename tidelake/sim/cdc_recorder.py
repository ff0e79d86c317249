"""Stream recorder: every ChangeDataEvent one store sends, for replay (`tidelake sim-replay`), in
an append-only big-endian file of OPEN, REQUEST, EVENT and CLOSE records per stream; the format is
in docs/internals.md#cdc_recorder.
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
