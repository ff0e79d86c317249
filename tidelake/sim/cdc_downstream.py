"""One subscription ("downstream" in TiKV): (conn, request_id, region_id) and its lifecycle, as
TiKV's delegate (docs/wire.md#incremental-scan): INITIALIZING, NORMAL once the scan and its
INITIALIZED row are queued (only then resolved ts), STOPPED after an error. Two chaos knobs change
only what the protocol allows: COMMIT before its PREWRITE, rows delivered twice.

More: docs/internals.md#cdc_downstream.
"""

from __future__ import annotations

from enum import Enum

from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cdc_conn import Conn
from tidelake.sim.cdc_observed_range import ObservedRange
from tidelake.sim.cdc_rows import LogType, Row, commit_of, pack_scan_rows, scan_row
from tidelake.sim.mvcc import ApplyEntry


class DownstreamState(Enum):
    INITIALIZING = "initializing"
    NORMAL = "normal"
    STOPPED = "stopped"


class Downstream:
    def __init__(self, conn: Conn[Downstream], request_id: int, region_id: int, region_version: int,
                 checkpoint_ts: int, observed: ObservedRange) -> None:
        self.conn = conn
        self.request_id = request_id
        self.region_id = region_id
        self.region_version = region_version
        self.checkpoint_ts = checkpoint_ts
        self.observed = observed
        self.state = DownstreamState.INITIALIZING
        self.advanced_to = 0  # only the resolved-ts advancer thread touches it
        self._held_prewrites: list[Row] = []

    @property
    def key(self) -> tuple[int, int]:
        return self.request_id, self.region_id

    def _event(self, rows: list[Row]) -> cdcpb_pb2.Event:
        return cdcpb_pb2.Event(region_id=self.region_id, request_id=self.request_id,
                               entries=cdcpb_pb2.Event.Entries(entries=rows))

    def on_realtime(self, rows: list[tuple[bytes, Row]], commit_before_prewrite: bool,
                    duplicate: bool) -> bool:
        """Rows of one applied batch as (encoded key, row); called under the MVCC lock.

        False when the sink memory quota refused them: the caller fails the region `congested`.
        """
        mine = [row for enc, row in rows if self.observed.contains_encoded(enc)]
        if not mine:
            return True
        with self.conn.lock:
            if self.state is DownstreamState.STOPPED:
                return True
            if commit_before_prewrite and self.state is DownstreamState.INITIALIZING:
                self._held_prewrites.extend(r for r in mine if r.type == LogType.PREWRITE)
                mine = [r for r in mine if r.type != LogType.PREWRITE]
            if duplicate:
                mine = [dup for r in mine for dup in ((r, r) if r.type in _REPEATABLE else (r,))]
            return not mine or self.conn.try_send_events([self._event(mine)])

    def finish_scan(self, entries: list[ApplyEntry], duplicate: bool) -> bool:
        """Queue the incremental scan (+ INITIALIZED) and turn NORMAL; False if stopped meanwhile."""
        rows: list[Row] = []
        for e in entries:
            if not self.observed.contains_encoded(encode_bytes(e.key)):
                continue
            row = scan_row(e)
            if duplicate and row.type == LogType.COMMITTED:
                rows.extend((commit_of(row), row, row))
            elif duplicate:
                rows.extend((row, row))
            else:
                rows.append(row)
        groups = pack_scan_rows(rows)
        with self.conn.lock:
            if self.state is DownstreamState.STOPPED:
                return False
            held = [self._event(self._held_prewrites)] if self._held_prewrites else []
            self.conn.try_send_events(held + [self._event(group) for group in groups], force=True)
            self._held_prewrites = []
            self.state = DownstreamState.NORMAL
        return True

    def stop(self, error: cdcpb_pb2.Error | None) -> bool:
        """Send `error` (if any) as the last message of this subscription; False if already stopped.

        The (request_id, region_id) slot is freed in the same critical section, so a client that
        re-registers as soon as it reads the error is never told duplicate_request.
        """
        with self.conn.lock:
            if self.state is DownstreamState.STOPPED:
                return False
            self.state = DownstreamState.STOPPED
            if self.conn.downstreams.get(self.key) is self:
                del self.conn.downstreams[self.key]
            self._held_prewrites = []
            if error is not None:
                self.conn.send_event(cdcpb_pb2.Event(region_id=self.region_id, request_id=self.request_id,
                                                     error=error))
        return True


_REPEATABLE = (LogType.PREWRITE, LogType.COMMITTED)


def encode_rows(rows: list[Row]) -> list[tuple[bytes, Row]]:
    """Pair rows with their encoded keys once per batch, for the per-downstream range filter."""
    return [(encode_bytes(r.key), r) for r in rows]
