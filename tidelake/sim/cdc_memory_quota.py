"""The CDC sink memory quota of one store (TiKV `cdc.sink-memory-quota`, components/cdc channel.rs).

Every event queued for a client holds its size in bytes until the stream hands it to gRPC. When a
client reads slower than the store writes, the quota runs out and TiKV does not buffer more: a
realtime batch or an incremental scan that cannot allocate fails its region with `congested`
(facts/kvproto.md §7.7) and the client subscribes again later. Error events are sent with
`force` and take no quota, so a region's last word always gets out.
"""

from __future__ import annotations

import threading

SINK_MEMORY_QUOTA_BYTES = 512 * 1024 * 1024  # TiKV default `cdc.sink-memory-quota` (512 MiB)


class SinkMemoryQuota:
    """Bytes held by queued events, shared by every stream of a store. Thread-safe."""

    def __init__(self, capacity_bytes: int = SINK_MEMORY_QUOTA_BYTES) -> None:
        if capacity_bytes <= 0:
            raise ValueError(f"sink memory quota must be positive, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self._in_use = 0
        self._mutex = threading.Lock()

    @property
    def in_use(self) -> int:
        with self._mutex:
            return self._in_use

    def alloc(self, nbytes: int) -> bool:
        """Take `nbytes` if they fit; False (nothing taken) when the quota would be exceeded."""
        with self._mutex:
            if self._in_use + nbytes > self.capacity_bytes:
                return False
            self._in_use += nbytes
            return True

    def free(self, nbytes: int) -> None:
        with self._mutex:
            self._in_use -= nbytes
