"""Per-table bootstrap progress on the console: ranges (regions) done, rows, MB/s.

The final line separates the read from the Delta write where they are apart (the local path):
a small table's rate over read + write says more about the write than the read. Owner: bootstrap."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class TableProgress:
    """Thread-safe counters of one table's read; prints at most one line per `interval_s`."""

    def __init__(self, name: str, ranges: int, interval_s: float = 5.0, out: TextIO | None = None) -> None:
        self.name = name
        self.ranges = ranges
        self.ranges_done = 0
        self.rows = 0
        self.bytes = 0
        self._interval = interval_s
        self._out = out if out is not None else sys.stderr
        self._started = time.monotonic()
        self._last_print = self._started
        self._read_s: float | None = None
        self._lock = threading.Lock()

    def add(self, rows: int, nbytes: int, ranges_done: int = 0) -> None:
        with self._lock:
            self.rows += rows
            self.bytes += nbytes
            self.ranges_done += ranges_done
            self._maybe_print()

    def set_totals(self, rows: int, nbytes: int, ranges_done: int) -> None:
        """Absolute counters (Spark accumulators report totals, not increments)."""
        with self._lock:
            self.rows, self.bytes, self.ranges_done = rows, nbytes, ranges_done
            self._maybe_print()

    def read_done(self) -> None:
        """The rows are in memory; what follows is the write."""
        self._read_s = self.elapsed_s

    def finish(self, what: str) -> None:
        with self._lock:
            if self._read_s is None:
                self._print(self.elapsed_s, f"{what}; read and written together")
            else:
                self._print(self._read_s, what, written_s=self.elapsed_s - self._read_s)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def _maybe_print(self) -> None:
        now = time.monotonic()
        if now - self._last_print >= self._interval:
            self._last_print = now
            self._print(now - self._started, "reading")

    def _print(self, seconds: float, what: str, written_s: float | None = None) -> None:
        """Counters and their rates over `seconds`: the read alone when the write came after it."""
        read = "" if written_s is None else f" read in {seconds:.1f} s"
        written = "" if written_s is None else f", written in {written_s:.1f} s"
        seconds = max(seconds, 1e-6)
        print(
            f"bootstrap {self.name}: {what}; regions {self.ranges_done}/{self.ranges}, {self.rows} rows, "
            f"{self.bytes / 1e6:.1f} MB{read}, {self.bytes / 1e6 / seconds:.1f} MB/s, "
            f"{self.rows / seconds:.0f} rows/s{written}",
            file=self._out, flush=True,
        )
