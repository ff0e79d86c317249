"""Span division into region requests and the range lock that remembers per-piece resolved ts.

TiCDC `divideSpanAndScheduleRegionRequests` + `CutRegionsLeftCoverSpan` + `regionlock`
(docs/wire.md#span-division). The lock is what makes re-division after a split or merge safe: each
region request's checkpoint_ts is the resolved ts recorded for exactly the sub-range it covers,
so a piece resumes from its own progress and never from a neighbour's higher ts.
Owner: the EventFeed client.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from enum import StrEnum
from threading import Lock
from typing import Protocol

from sortedcontainers import SortedDict

from tidelake.kvproto import metapb_pb2

Span = tuple[bytes, bytes]  # region space; empty end = +inf


class RegionLike(Protocol):
    """A region as PD reports it (tidelake.upstream.pd_client.RegionInfo has this shape)."""

    @property
    def region(self) -> metapb_pb2.Region: ...

    @property
    def leader(self) -> metapb_pb2.Peer | None: ...


class BatchRegionSource(Protocol):
    def batch_scan_regions(self, ranges: list[Span], limit: int = 1024) -> list[RegionLike]: ...


@dataclass(frozen=True, slots=True)
class RegionTarget:
    """A region with the leader we will send its request to (PD's, or one named by not_leader)."""

    region: metapb_pb2.Region
    leader: metapb_pb2.Peer | None


def end_before(a: bytes, b: bytes) -> bool:
    """a < b for span ends, where empty means +inf."""
    return bool(a) and (not b or a < b)


def intersect(a: Span, b: Span) -> Span | None:
    """Overlap of two region-space spans, or None when they do not overlap."""
    start = max(a[0], b[0])
    end = a[1] if end_before(a[1], b[1]) else b[1]
    if end and start >= end:
        return None
    return start, end


def cut_regions_left_cover_span(regions: list[RegionLike], span: Span) -> list[RegionLike]:
    """Longest prefix (by start key) that is contiguous and starts at or before span start."""
    ordered = sorted(
        (r for r in regions if not r.region.end_key or r.region.end_key > span[0]),  # ignore regions left of it
        key=lambda r: r.region.start_key,
    )
    if not ordered or ordered[0].region.start_key > span[0]:
        return []
    kept = [ordered[0]]
    for info in ordered[1:]:
        last_end = kept[-1].region.end_key
        if not end_before(last_end, span[1]):
            break
        if info.region.start_key != last_end:
            break
        kept.append(info)
    return kept


def disjoint_batch(spans: list[Span]) -> tuple[list[int], list[int]]:
    """Indexes of `spans` that can go in one BatchScanRegions (sorted by start, none overlapping
    the one before, as PD requires), and the indexes left for a later batch."""
    order = sorted(range(len(spans)), key=lambda i: spans[i][0])
    taken: list[int] = []
    later: list[int] = []
    for i in order:
        previous_end = spans[taken[-1]][1] if taken else None
        if previous_end is not None and (not previous_end or previous_end > spans[i][0]):
            later.append(i)  # overlaps the span taken before it (or that one runs to +inf)
        else:
            taken.append(i)
    return taken, later


def batch_regions_covering(
    source: BatchRegionSource, requests: list[tuple[Span, Span]], limit: int
) -> list[tuple[list[tuple[RegionTarget, Span]], Span | None, bool]]:
    """Regions covering each request's span from its start, for many spans with one PD request.

    `requests` are (span, table span) pairs, sorted and disjoint (`disjoint_batch`). Per request
    it returns its pieces, the part of its span left uncovered, and whether that part lies past
    where PD stopped at `limit` (ask again at once) rather than being a hole (a region mid-split
    or not yet reported: back off and divide it again). A piece is the region ∩ the whole
    subscribed span, not ∩ `span`: after a merge, the merged region must be requested (and
    locked) once for all it covers, or TiKV would see the same (request_id, region) twice
    (docs/wire.md#span-division).
    """
    regions = sorted(source.batch_scan_regions([span for span, _ in requests], limit),
                     key=lambda r: r.region.start_key)
    starts = [r.region.start_key for r in regions]
    # PD stopped at the limit: nothing at or past the end of the last region returned was scanned.
    cut = regions[-1].region.end_key if len(regions) >= limit else None
    out = []
    for span, table_span in requests:
        pieces, rest = _cover(regions, starts, span, table_span)
        out.append((pieces, rest, rest is not None and bool(cut) and rest[0] >= cut))
    return out


def _cover(regions: list[RegionLike], starts: list[bytes], span: Span,
           table_span: Span) -> tuple[list[tuple[RegionTarget, Span]], Span | None]:
    """TiCDC's division loop over regions already fetched: cut the contiguous prefix that covers
    the span's start (`cut_regions_left_cover_span`), go on from its end."""
    pieces: list[tuple[RegionTarget, Span]] = []
    start, end = span
    while True:
        nearby = []
        i = max(bisect_right(starts, start) - 1, 0)
        while i < len(regions) and not (end and starts[i] >= end):
            nearby.append(regions[i])
            i += 1
        cover = cut_regions_left_cover_span(nearby, (start, end))
        if not cover:
            return pieces, (start, end)
        for info in cover:
            sub = intersect(table_span, (info.region.start_key, info.region.end_key))
            if sub is not None:
                pieces.append((RegionTarget(info.region, info.leader), sub))
        last_end = cover[-1].region.end_key
        if not end_before(last_end, end):
            return pieces, None
        start = max(start, last_end)


@dataclass(eq=False, slots=True)
class LockedRange:
    """One region's hold on a sub-range; `checkpoint_ts` is where its request starts."""

    start: bytes
    end: bytes
    region_id: int
    version: int
    checkpoint_ts: int


class LockOutcome(StrEnum):
    LOCKED = "locked"
    STALE = "stale"  # a newer region holds part of it: `retry` lists the free parts to divide again
    WAIT = "wait"  # older regions hold part of it; retry after they unlock


@dataclass(frozen=True, slots=True)
class LockResult:
    kind: LockOutcome
    locked: LockedRange | None = None
    retry: tuple[Span, ...] = ()


class RangeLock:
    """Which region holds each part of a subscription's span, and the resolved ts of free parts.

    Stored as a piecewise map (start key -> LockedRange or resolved ts) over [start, end).
    Thread-safe: the scheduler locks, region workers unlock.
    """

    def __init__(self, start: bytes, end: bytes, initial_ts: int) -> None:
        self._start = start
        self._end = end
        self._pieces: SortedDict = SortedDict({start: initial_ts})
        self._mutex = Lock()

    def lock(self, start: bytes, end: bytes, region_id: int, version: int) -> LockResult:
        with self._mutex:
            clipped = intersect((start, end), (self._start, self._end))
            if clipped is None:
                return LockResult(LockOutcome.STALE)
            start, end = clipped
            pieces = self._overlapping(start, end)
            held = [v for _, _, v in pieces if isinstance(v, LockedRange)]
            if any(h.version >= version for h in held):
                free = tuple((s, e) for s, e, v in pieces if not isinstance(v, LockedRange))
                return LockResult(LockOutcome.STALE, retry=_coalesce(free))
            if held:
                return LockResult(LockOutcome.WAIT)
            locked = LockedRange(start, end, region_id, version, min(v for _, _, v in pieces))
            self._assign(start, end, locked)
            return LockResult(LockOutcome.LOCKED, locked)

    def unlock(self, locked: LockedRange, resolved_ts: int) -> None:
        """Free the range, recording how far it got (at least its own checkpoint)."""
        with self._mutex:
            ts = max(resolved_ts, locked.checkpoint_ts)
            for s, e, v in self._overlapping(locked.start, locked.end):
                if v is locked:
                    self._assign(s, e, ts)

    def pieces(self) -> list[tuple[bytes, bytes, int | LockedRange]]:
        with self._mutex:
            return self._overlapping(self._start, self._end)

    def _overlapping(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes, int | LockedRange]]:
        keys = list(self._pieces.keys())
        first = max(self._pieces.bisect_right(start) - 1, 0)
        out = []
        for i in range(first, len(keys)):
            piece_start = keys[i]
            if end and piece_start >= end:
                break
            piece_end = keys[i + 1] if i + 1 < len(keys) else self._end
            part = intersect((piece_start, piece_end), (start, end))
            if part is not None:
                out.append((part[0], part[1], self._pieces[piece_start]))
        return out

    def _assign(self, start: bytes, end: bytes, value: int | LockedRange) -> None:
        for key in (start, end):
            if key and key != self._end and key not in self._pieces:
                self._pieces[key] = self._pieces.peekitem(self._pieces.bisect_right(key) - 1)[1]
        stop = None if not end or end == self._end else end
        for key in list(self._pieces.irange(start, stop, inclusive=(True, False))):
            del self._pieces[key]
        self._pieces[start] = value
        for key in (start, end):
            self._merge_equal_free(key)

    def _merge_equal_free(self, key: bytes) -> None:
        if key not in self._pieces:
            return
        index = self._pieces.index(key)
        value = self._pieces[key]
        if index > 0 and not isinstance(value, LockedRange) and self._pieces.peekitem(index - 1)[1] == value:
            del self._pieces[key]


def _coalesce(spans: tuple[Span, ...]) -> tuple[Span, ...]:
    out: list[Span] = []
    for s, e in spans:
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return tuple(out)
