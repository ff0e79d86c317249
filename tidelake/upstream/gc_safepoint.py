"""Keep the upstream from garbage-collecting versions a changefeed still needs (docs/metadata.md#pd-gc-safepoint).

Like the TiCDC owner, we hold a PD service GC safepoint at `checkpoint - 1` (a snapshot read at
the checkpoint must stay complete) with a TTL, and refresh it from a background thread well
within the TTL. PD refuses a safepoint below the current minimum silently, by answering with a
higher minimum; we turn that into a clear error instead of replicating from a lost snapshot.
Owner: the puller runner, and bootstrap while it reads its snapshot.
"""

from __future__ import annotations

import logging
import threading

from tidelake.config import GC_TTL_MIN_S
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.upstream_errors import BelowGCSafepointError, UpstreamError

log = logging.getLogger(__name__)

_MAX_UINT64 = (1 << 64) - 1
_MAX_REFRESH_S = 60.0  # TiCDC updates at most once a minute (gcSafepointUpdateInterval)


class GCSafepointKeeper:
    """One service safepoint per changefeed: `tidelake-<changefeed id>` by convention."""

    def __init__(self, pd: PDClient, service_id: str, ttl_s: float = 86400.0) -> None:
        if ttl_s < GC_TTL_MIN_S:
            raise ValueError(f"GC safepoint TTL must be at least {GC_TTL_MIN_S:.0f} seconds")
        self._pd = pd
        self.service_id = service_id
        self.ttl_s = int(ttl_s)
        self.refresh_s = min(_MAX_REFRESH_S, ttl_s / 3)
        self._lock = threading.Lock()
        self._checkpoint: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: UpstreamError | None = None

    def ensure_not_below_gc(self, ts: int) -> None:
        """Hold `ts - 1` and require PD to accept it, so a snapshot read at `ts` stays complete.

        Raises BelowGCSafepointError when the versions at `ts` may already be collected."""
        self._hold(ts)
        gc_safe_point = self._pd.get_gc_safepoint()
        if ts < gc_safe_point:
            raise BelowGCSafepointError(_below_message(ts, gc_safe_point, "the cluster GC safepoint"))

    def advance(self, checkpoint_ts: int) -> None:
        """Move the safepoint up to `checkpoint_ts - 1`; never moves it down."""
        with self._lock:
            if self._checkpoint is not None and checkpoint_ts <= self._checkpoint:
                return
        self._hold(checkpoint_ts)

    def _hold(self, ts: int) -> None:
        min_safe_point = self._pd.update_service_gc_safepoint(self.service_id, self.ttl_s, ts - 1)
        # PD saves the request only if it is >= the minimum; a higher minimum means refused (docs/metadata.md#server-semantics).
        if min_safe_point > ts - 1:
            raise BelowGCSafepointError(_below_message(ts, min_safe_point, "the service GC safepoint"))
        with self._lock:
            self._checkpoint = ts

    @property
    def checkpoint(self) -> int | None:
        with self._lock:
            return self._checkpoint

    def start(self) -> None:
        """Refresh the held safepoint in the background until stop()."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"gc-keeper-{self.service_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh_s):
            checkpoint = self.checkpoint
            if checkpoint is None:
                continue
            try:
                self._hold(checkpoint)
                self.last_error = None
            except UpstreamError as exc:
                self.last_error = exc
                log.error("refreshing GC safepoint %s: %s", self.service_id, exc)

    def stop(self) -> None:
        """Stop refreshing but keep the safepoint: it protects a restart for its TTL."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def release(self) -> None:
        """Remove the safepoint (changefeed deleted, or a one-off snapshot finished)."""
        self.stop()
        # docs/metadata.md#server-semantics: TTL=0 with safe_point=MaxUint64 removes the entry.
        self._pd.update_service_gc_safepoint(self.service_id, 0, _MAX_UINT64)
        with self._lock:
            self._checkpoint = None


def _below_message(ts: int, safe_point: int, which: str) -> str:
    return (
        f"start ts {ts} is below the GC safepoint {safe_point} ({which}): the upstream may already "
        f"have collected the versions a snapshot at {ts} needs. Choose a start ts above {safe_point} "
        "(and, for TiDB, raise tidb_gc_life_time if changefeeds need to start further back)"
    )
