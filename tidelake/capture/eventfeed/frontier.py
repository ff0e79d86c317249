"""Span frontier: the minimum resolved ts over a key span (docs/wire.md §9.5).

A table's resolved ts is the minimum over its regions, never a maximum: Flink CDC's
`getMaxResolvedTs` is how rows got lost on restore (docs/peers.md §2). The span is kept as a
piecewise-constant function (node start key -> ts, each node running to the next start) plus an
ordered index by ts, so forward and frontier are O(log n) amortised whatever the region layout,
and a forward whose boundaries differ from the current nodes (after a split or merge) splits the
nodes it cuts and overwrites what it covers.
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
        self._split_at(start)
        if end and end != self._end:
            self._split_at(end)
        covered = list(self._nodes.irange(start, end, inclusive=(True, False))) if end else list(
            self._nodes.irange(minimum=start)
        )
        for key in covered:
            self._remove(key)
        self._put(start, ts)
        self._merge_with_previous(start)
        if end and end != self._end:
            self._merge_with_previous(end)

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

    def _merge_with_previous(self, key: bytes) -> None:
        index = self._nodes.index(key)
        if index > 0 and self._nodes.peekitem(index - 1)[1] == self._nodes[key]:
            self._remove(key)

    def _put(self, key: bytes, ts: int) -> None:
        self._nodes[key] = ts
        self._by_ts.add((ts, key))

    def _remove(self, key: bytes) -> None:
        ts = self._nodes.pop(key)
        self._by_ts.remove((ts, key))
