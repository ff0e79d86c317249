"""Span frontier: the minimum resolved ts over a key span (docs/wire.md#resolved-ts-handling).

A table's resolved ts is the minimum over its regions, never a maximum (docs/peers.md#flink-cdc-tidb-connector
says how a maximum lost rows). Forward and frontier are O(log n) whatever the region layout.
Owner: the EventFeed client, one frontier per table.

More: docs/internals.md#frontier.
"""

from __future__ import annotations

from collections.abc import Iterator

from sortedcontainers import SortedDict, SortedList


class SpanFrontier:
    """Resolved ts over [start, end) in region space; an empty end means +inf."""

    def __init__(self, start: bytes, end: bytes, initial_ts: int = 0) -> None:
        if end and start >= end:
            raise ValueError(f"empty frontier span [{start.hex()}, {end.hex()})")
        self._start = start
        self._end = end
        self._nodes: SortedDict = SortedDict({start: initial_ts})
        self._by_ts: SortedList = SortedList([(initial_ts, start)])

    @property
    def span(self) -> tuple[bytes, bytes]:
        return self._start, self._end

    def frontier(self) -> int:
        """Minimum ts over the whole span."""
        return self._by_ts[0][0]

    def forward(self, start: bytes, end: bytes, ts: int) -> None:
        """Set the ts of [start, end) ∩ span to `ts`, overwriting whatever covered it."""
        start = max(start, self._start)
        end = self._clip_end(end)
        if end and start >= end:
            return
        old = self._nodes.get(start)
        if old is not None and self._end_of(start) == end:  # exactly one piece: update it in place
            if old != ts:
                self._by_ts.remove((old, start))
                self._put(start, ts)
            return
        self._split_at(start)
        if end and end != self._end:
            self._split_at(end)
        covered = list(self._nodes.irange(start, end, inclusive=(True, False))) if end else list(
            self._nodes.irange(minimum=start)
        )
        for key in covered:
            self._remove(key)
        self._put(start, ts)

    def spans(self) -> Iterator[tuple[bytes, bytes, int]]:
        """(start, end, ts) pieces in key order; the last end is the span end."""
        keys = list(self._nodes.keys())
        for i, key in enumerate(keys):
            yield key, keys[i + 1] if i + 1 < len(keys) else self._end, self._nodes[key]

    def __len__(self) -> int:
        return len(self._nodes)

    def _clip_end(self, end: bytes) -> bytes:
        if not end:
            return self._end
        if self._end and end > self._end:
            return self._end
        return end

    def _split_at(self, key: bytes) -> None:
        if key in self._nodes:
            return
        previous = self._nodes.peekitem(self._nodes.bisect_right(key) - 1)[1]
        self._put(key, previous)

    def _end_of(self, key: bytes) -> bytes:
        """Where the piece starting at `key` ends: the next node, or the span end."""
        index = self._nodes.index(key) + 1
        return self._nodes.peekitem(index)[0] if index < len(self._nodes) else self._end

    def _put(self, key: bytes, ts: int) -> None:
        self._nodes[key] = ts
        self._by_ts.add((ts, key))

    def _remove(self, key: bytes) -> None:
        ts = self._nodes.pop(key)
        self._by_ts.remove((ts, key))
