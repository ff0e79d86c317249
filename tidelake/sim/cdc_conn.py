"""One EventFeed stream ("Conn" in TiKV): its feature gates, subscriptions and outbound queue.

Everything sent on a stream - realtime rows from the apply observer, scan rows, errors,
resolved ts - is enqueued under `Conn.lock` into one FIFO, so the order the client sees is the
order in which the server decided to send (what makes "resolved ts after the commits it
covers" and "nothing after an Error" hold). The response generator batches consecutive Events
into one ChangeDataEvent (<= 64 Events, ~6 MiB) and gives every ResolvedTs its own
ChangeDataEvent (docs/wire.md#batching). Row events hold the store's sink memory quota while
queued (`try_send_events`); errors and resolved ts are forced and hold none.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import grpc

from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cdc_features import FeatureGate
from tidelake.sim.cdc_memory_quota import SinkMemoryQuota

# What a connection registers per (request_id, region_id): cdc_downstream.Downstream.
Sub = TypeVar("Sub")

CDC_EVENT_MAX_COUNT = 64
CDC_RESP_MAX_BYTES = 6 * 1024 * 1024
_POLL_S = 0.2

_conn_ids = itertools.count(1)


@dataclass(frozen=True)
class _End:
    """Marker: close the stream with OK once everything before it is sent."""


@dataclass(frozen=True)
class StreamAbort:
    """Marker: fail the stream with this status."""

    code: grpc.StatusCode
    details: str


class Conn(Generic[Sub]):
    def __init__(self, peer: str, method: str, explicit_features: tuple[str, ...],
                 quota: SinkMemoryQuota | None = None) -> None:
        self.id = next(_conn_ids)
        self.peer = peer
        self.method = method
        self.explicit_features = explicit_features
        self.gate: FeatureGate | None = None  # set by the first request (docs/wire.md#connection-setup)
        self.lock = threading.Lock()
        self.downstreams: dict[tuple[int, int], Sub] = {}  # (request_id, region_id)
        self.closed = False
        self._quota = quota if quota is not None else SinkMemoryQuota()
        self._out: queue.SimpleQueue = queue.SimpleQueue()  # (item, quota bytes it holds)

    def set_version(self, ticdc_version: str) -> None:
        self.gate = FeatureGate.for_connection(ticdc_version, self.explicit_features)

    @property
    def multiplexing(self) -> bool:
        return self.gate is not None and self.gate.stream_multiplexing

    # The send_* methods require `self.lock` held by the caller.
    def send_event(self, event: cdcpb_pb2.Event) -> None:
        """Forced send (errors): never refused, holds no quota."""
        if not self.closed:
            self._out.put((event, 0))

    def try_send_events(self, events: list[cdcpb_pb2.Event], force: bool = False) -> bool:
        """Queue row events holding their bytes of the sink memory quota; False (nothing queued)
        when the quota cannot take all of them, unless forced."""
        if self.closed:
            return True
        sizes = [e.ByteSize() for e in events]
        if not self._quota.alloc(sum(sizes), force):
            return False
        for event, size in zip(events, sizes):
            self._out.put((event, size))
        return True

    def send_resolved_ts(self, resolved: cdcpb_pb2.ResolvedTs) -> None:
        if not self.closed:
            self._out.put((resolved, 0))

    def discard_pending(self) -> None:
        """The stream is over: drop what was never sent and give its quota back."""
        with self.lock:
            self.closed = True
        while True:
            try:
                _, size = self._out.get_nowait()
            except queue.Empty:
                return
            self._quota.free(size)

    def _take(self, block: bool) -> object:
        item, size = self._out.get(timeout=_POLL_S) if block else self._out.get_nowait()
        self._quota.free(size)
        return item

    def finish(self) -> None:
        """End the stream with OK after the queued messages (client closed its side)."""
        with self.lock:
            if not self.closed:
                self.closed = True
                self._out.put((_End(), 0))

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        """Fail the stream now; queued messages are dropped like a broken connection drops them."""
        with self.lock:
            self.closed = True
            self._out.put((StreamAbort(code, details), 0))

    def responses(self, is_active: Callable[[], bool]) -> Iterator[cdcpb_pb2.ChangeDataEvent | StreamAbort]:
        """ChangeDataEvents in queue order; yields an StreamAbort as the last item on failure."""
        pending = None
        while True:
            item = pending
            pending = None
            if item is None:
                try:
                    item = self._take(block=True)
                except queue.Empty:
                    if not is_active():
                        return
                    continue
            if isinstance(item, _End):
                return
            if isinstance(item, StreamAbort):
                yield item
                return
            if isinstance(item, cdcpb_pb2.ResolvedTs):
                yield cdcpb_pb2.ChangeDataEvent(resolved_ts=item)
                continue
            events = [item]
            size = item.ByteSize()
            while len(events) < CDC_EVENT_MAX_COUNT:
                try:
                    nxt = self._take(block=False)
                except queue.Empty:
                    break
                if isinstance(nxt, cdcpb_pb2.Event) and size + nxt.ByteSize() <= CDC_RESP_MAX_BYTES:
                    events.append(nxt)
                    size += nxt.ByteSize()
                    continue
                pending = nxt
                break
            yield cdcpb_pb2.ChangeDataEvent(events=events)

