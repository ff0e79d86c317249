"""Resolved-ts advancing and its batched emission (TiKV `on_min_ts` / `Advance::emit_resolved_ts`):
a region's resolved ts is min(oldest lock start ts in its range, a fresh TSO), never above a
commit still to be sent (docs/wire.md#resolved-ts-bounds), emitted in growing chunks per stream.

More: docs/internals.md#cdc_resolved_ts.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable, Iterator

from tidelake.kvproto import cdcpb_pb2
from tidelake.sim.cdc_conn import Conn
from tidelake.sim.cdc_downstream import Downstream, DownstreamState

FIRST_CHUNK = 8
CHUNK_GROWTH = 4

_tiebreak = itertools.count()


class ResolvedRegionHeap:
    """Min-heap of (ts, downstream): the slowest regions go out first, in growing chunks."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Downstream]] = []

    def push(self, ts: int, downstream: Downstream) -> None:
        heapq.heappush(self._heap, (ts, next(_tiebreak), downstream))

    def chunks(self) -> Iterator[list[tuple[int, Downstream]]]:
        count = FIRST_CHUNK
        while self._heap:
            yield [(ts, d) for ts, _, d in (heapq.heappop(self._heap) for _ in range(min(count, len(self._heap))))]
            count *= CHUNK_GROWTH


def group_key(downstream: Downstream) -> tuple[Conn, int]:
    conn = downstream.conn
    return conn, downstream.request_id if conn.multiplexing else 0


def advance(downstreams: list[Downstream], min_ts: int, min_lock_ts: Callable[[Downstream], int | None],
            is_leader: Callable[[Downstream], bool]) -> dict[tuple[Conn, int], ResolvedRegionHeap]:
    """Advance every NORMAL downstream and group the results for emission."""
    groups: dict[tuple[Conn, int], ResolvedRegionHeap] = {}
    for d in downstreams:
        if d.state is not DownstreamState.NORMAL or not is_leader(d):
            continue
        lock_ts = min_lock_ts(d)
        advanced_to = min_ts if lock_ts is None else min(lock_ts, min_ts)
        if advanced_to > d.advanced_to:
            d.advanced_to = advanced_to
        groups.setdefault(group_key(d), ResolvedRegionHeap()).push(d.advanced_to, d)
    return groups


def emit(groups: dict[tuple[Conn, int], ResolvedRegionHeap]) -> None:
    """Queue the ResolvedTs messages; a downstream stopped since `advance` is left out."""
    for (conn, request_id), heap in groups.items():
        batch = conn.gate is not None and conn.gate.batch_resolved_ts
        for chunk in heap.chunks():
            with conn.lock:
                live = [(ts, d) for ts, d in chunk if d.state is DownstreamState.NORMAL]
                if not live:
                    continue
                if batch:
                    conn.send_resolved_ts(cdcpb_pb2.ResolvedTs(
                        regions=[d.region_id for _, d in live], ts=min(ts for ts, _ in live),
                        request_id=request_id))
                else:
                    for ts, d in live:
                        conn.send_event(cdcpb_pb2.Event(region_id=d.region_id, request_id=d.request_id,
                                                        resolved_ts=ts))


class MinTsTicker:
    """Calls `tick` every `interval_s` on a daemon thread until stopped."""

    def __init__(self, interval_s: float, tick: Callable[[], None], name: str) -> None:
        self._interval_s = interval_s
        self._tick = tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._tick()
