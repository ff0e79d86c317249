"""Per-request backoff budget for TiKV requests, after client-go's `Backoffer`.

One Backoffer lives for one logical read (a get, or one region's scan batch): each error kind
grows its own exponential delay, and the sum of all sleeps is capped so a request that can never
succeed ends with an error naming what kept failing, instead of retrying forever.
Owner: each KV read, one Backoffer per logical read.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from tidelake.errors import StopRequested
from tidelake.upstream.upstream_errors import UpstreamError

# (base seconds, cap seconds), client-go config/retry/backoff.go (docs/metadata.md#region-errors-during-reads).
KINDS: dict[str, tuple[float, float]] = {
    "region_miss": (0.002, 0.5),
    "region_scheduling": (0.002, 0.5),
    "tikv_rpc": (0.1, 2.0),
    "tikv_server_busy": (2.0, 10.0),
    "max_ts_not_synced": (0.002, 0.5),
    "stale_command": (0.002, 1.0),
    "txn_lock": (0.002, 3.0),
}


@dataclass
class Backoffer:
    budget_s: float
    sleep: Callable[[float], None] = time.sleep
    slept_s: float = 0.0
    attempts: dict[str, int] = field(default_factory=dict)
    last_reason: str = ""
    cancel: threading.Event | None = None  # set: the next backoff raises instead of sleeping

    def backoff(self, kind: str, reason: str, hint_s: float | None = None) -> None:
        """Sleep before retrying; raise UpstreamError once the budget is spent."""
        base, cap = KINDS[kind]
        attempt = self.attempts.get(kind, 0)
        self.attempts[kind] = attempt + 1
        delay = min(cap, base * (2**attempt))
        delay = delay / 2 + random.uniform(0, delay / 2)  # client-go EqualJitter
        if hint_s is not None and hint_s > 0:
            # A lock's remaining TTL bounds the wait (BackoffWithMaxSleepTxnLockFast); a busy
            # store's backoff_ms hint is a floor.
            delay = max(min(delay, hint_s), base) if kind == "txn_lock" else min(max(delay, hint_s), cap)
        self.last_reason = reason
        if self.slept_s + delay > self.budget_s:
            raise UpstreamError(
                f"gave up after {self.slept_s:.1f}s of retries (budget {self.budget_s:g}s); last error: {reason}"
            )
        self.slept_s += delay
        if self.cancel is not None:
            if self.cancel.wait(delay):
                raise StopRequested(f"stopped while retrying; last error: {reason}")
            return
        self.sleep(delay)
