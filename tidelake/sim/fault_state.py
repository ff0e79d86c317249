"""Fault knobs the simulated servicers consult on every request: the chaos surface of `tidelake sim`.

The servicers only read these; workloads and fault profiles set them. Each fault maps to something
a real cluster does (a busy TiKV, a slow disk, a restarted CDC endpoint, a congested sink) so clients
are exercised on the paths they meet in production.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class FaultState:
    busy_until_ms: dict[int, int] = field(default_factory=dict)  # store -> monotonic ms
    slow_store_delay_ms: dict[int, int] = field(default_factory=dict)
    commit_before_prewrite: bool = False  # docs/wire.md#commits-need-their-prewrite: allowed before INITIALIZED only
    duplicate_delivery: bool = False  # resend rows the protocol allows duplicating (at-least-once)
    _congested: dict[int, int] = field(default_factory=dict)  # region -> pending congested errors
    _stream_reset_listeners: list[Callable[[int], None]] = field(default_factory=list)
    _mu: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def make_busy(self, store_id: int, duration_ms: int) -> None:
        """Answer server_is_busy on `store_id` for the next `duration_ms`."""
        with self._mu:
            self.busy_until_ms[store_id] = _now_ms() + duration_ms

    def busy_remaining_ms(self, store_id: int) -> int:
        with self._mu:
            return max(0, self.busy_until_ms.get(store_id, 0) - _now_ms())

    def set_slow(self, store_id: int, delay_ms: int) -> None:
        with self._mu:
            self.slow_store_delay_ms[store_id] = delay_ms

    def slow_delay_ms(self, store_id: int) -> int:
        with self._mu:
            return self.slow_store_delay_ms.get(store_id, 0)

    def on_reset_streams(self, fn: Callable[[int], None]) -> None:
        """Register a callback (the CDC servicer) that aborts a store's EventFeed streams."""
        with self._mu:
            self._stream_reset_listeners.append(fn)

    def remove_reset_listener(self, fn: Callable[[int], None]) -> None:
        with self._mu:
            self._stream_reset_listeners.remove(fn)

    def reset_streams(self, store_id: int) -> None:
        with self._mu:
            listeners = list(self._stream_reset_listeners)
        for fn in listeners:
            fn(store_id)

    def congest(self, region_id: int, times: int = 1) -> None:
        """Make the next `times` CDC checks of `region_id` report `congested` (docs/wire.md#errors-raised-after-registration)."""
        with self._mu:
            self._congested[region_id] = self._congested.get(region_id, 0) + times

    def congested(self, region_id: int) -> bool:
        """True (and consumes one armed congestion) when `region_id` should report congested now."""
        with self._mu:
            left = self._congested.get(region_id, 0)
            if not left:
                return False
            if left == 1:
                del self._congested[region_id]
            else:
                self._congested[region_id] = left - 1
            return True

    def clear(self) -> None:
        with self._mu:
            self.busy_until_ms.clear()
            self.slow_store_delay_ms.clear()
            self._congested.clear()
            self.commit_before_prewrite = False
            self.duplicate_delivery = False
