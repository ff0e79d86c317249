"""The CDC sink memory quota of one store (TiKV `cdc.sink-memory-quota`, components/cdc channel.rs).

Every event queued for a client holds its size in bytes until the stream hands it to gRPC. When a
client reads slower than the store writes, the quota runs out and TiKV does not buffer more: a
realtime batch that cannot allocate fails its region with `congested` (docs/wire.md#errors-raised-after-registration)
and the client subscribes again later. Error events are sent with `force` and take no quota, so
a region's last word always gets out. Incremental scans hold quota but are never refused here:
TiKV sends them batch by batch while the client drains, which the simulator (queueing a scan at
once) can only honour by letting a scan larger than the quota through.
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

    def alloc(self, nbytes: int, force: bool = False) -> bool:
        """Take `nbytes` if they fit (always when forced); False (nothing taken) otherwise."""
        with self._mutex:
            if not force and self._in_use + nbytes > self.capacity_bytes:
                return False
            self._in_use += nbytes
            return True

    def free(self, nbytes: int) -> None:
        with self._mutex:
            self._in_use -= nbytes
