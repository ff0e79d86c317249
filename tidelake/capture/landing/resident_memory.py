"""How much this process's resident memory (RSS) has grown since its feed came up, and giving
memory malloc keeps freed back to the kernel. The lander stops taking rows while the process has
grown by more than its quota: the RSS counts what the rows' own accounting cannot (gRPC
responses, native write buffers, allocator caches). Owner: the lander of `tidelake pull`.

More: docs/internals.md#resident_memory.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

_STATM = "/proc/self/statm"


def resident_bytes() -> int | None:
    """This process's RSS (Linux /proc/self/statm, field 2, in pages); None where unavailable."""
    try:
        with open(_STATM, "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _malloc_trim() -> Callable[[], None] | None:
    """glibc's malloc_trim(0): return every free page of every malloc arena to the kernel; None
    where there is none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


class ResidentGrowth:
    """RSS now minus RSS at `mark_base()`'s first call (0 before it, or without an RSS reading).

    The lander marks the base when the first rows or resolved ts arrive: the process has imported
    everything and its feed is connected, so what it holds then is not data waiting to land."""

    def __init__(self, read: Callable[[], int | None] = resident_bytes,
                 trim: Callable[[], None] | None = _malloc_trim()) -> None:
        self._read = read
        self._trim = trim
        self._base: int | None = None

    def mark_base(self) -> None:
        if self._base is None:
            self._base = self._read()

    def growth(self) -> int:
        now = self._read() if self._base is not None else None
        return 0 if now is None or self._base is None else now - self._base

    def release_freed(self) -> None:
        """Give the memory malloc holds freed back to the kernel (glibc; nothing elsewhere)."""
        if self._trim is not None:
            self._trim()
