import random

from tidelake.capture.eventfeed.span_divider import (
    LockedRange,
    RangeLock,
    RegionTarget,
    batch_regions_covering,
    cut_regions_left_cover_span,
    disjoint_batch,
    intersect,
)
from tidelake.kvproto import metapb_pb2


def k(i: int) -> bytes:
    return bytes([i])


def region(rid, start, end, version=1, store=1):
    r = metapb_pb2.Region(id=rid, start_key=start, end_key=end,
                          region_epoch=metapb_pb2.RegionEpoch(conf_ver=1, version=version))
    r.peers.add(id=rid * 10, store_id=store)
    return RegionTarget(r, r.peers[0])


class FakePD:
    """Answers BatchScanRegions like PD: regions overlapping any range, sorted, each once, up to limit."""

    def __init__(self, regions, shuffle=False):
        self.regions = regions
        self.calls = []
        self.shuffle = shuffle

    def batch_scan_regions(self, ranges, limit=1024):
        self.calls.append((list(ranges), limit))
        hits = [r for r in self.regions
                if any(intersect(rng, (r.region.start_key, r.region.end_key)) for rng in ranges)]
        hits = sorted(hits, key=lambda r: r.region.start_key)[:limit]
        if self.shuffle:
            random.Random(len(self.calls)).shuffle(hits)
        return hits


def regions_covering(pd, span, table_span, limit=1024):
    """One request through batch_regions_covering: (pieces, rest, rest lies past PD's limit)."""
    [(pieces, rest, past_limit)] = batch_regions_covering(pd, [(span, table_span)], limit)
    return pieces, rest, past_limit


def ids(pieces):
    return [(t.region.id, sub) for t, sub in pieces]


def test_intersect_handles_infinite_ends():
    assert intersect((k(1), k(5)), (k(3), b"")) == (k(3), k(5))
    assert intersect((b"", b""), (k(3), k(4))) == (k(3), k(4))
    assert intersect((k(1), k(3)), (k(3), k(5))) is None
    assert intersect((k(4), b""), (b"", b"")) == (k(4), b"")


def test_divides_span_over_contiguous_regions_with_intersection():
    pd = FakePD([region(1, b"", k(10)), region(2, k(10), k(20)), region(3, k(20), b"")], shuffle=True)
    pieces, rest, _ = regions_covering(pd, (k(5), k(25)), (k(5), k(25)))
    assert rest is None and len(pd.calls) == 1
    assert ids(pieces) == [(1, (k(5), k(10))), (2, (k(10), k(20))), (3, (k(20), k(25)))]


def test_limit_leaves_the_rest_past_the_last_region_returned():
    pd = FakePD([region(i, k(i * 2), k(i * 2 + 2)) for i in range(10)])
    pieces, rest, truncated = regions_covering(pd, (k(0), k(20)), (k(0), k(20)), limit=3)
    assert truncated and rest == (k(6), k(20)) and [t.region.id for t, _ in pieces] == [0, 1, 2]
    pieces, rest, truncated = regions_covering(pd, rest, (k(0), k(20)), limit=30)
    assert not truncated and rest is None and [t.region.id for t, _ in pieces] == list(range(3, 10))


def test_a_hole_before_the_limit_backs_off_and_spans_past_it_are_asked_again():
    # [0, 2) is mid-split; the limit stops PD after region 2 ([4, 6)), before the second span.
    pd = FakePD([region(1, k(2), k(4)), region(2, k(4), k(6)), region(3, k(6), k(8)), region(4, k(10), k(12))])
    (pieces_a, rest_a, past_a), (pieces_b, rest_b, past_b) = batch_regions_covering(
        pd, [((k(0), k(8)), (k(0), k(8))), ((k(10), k(12)), (k(10), k(12)))], limit=2)
    assert pieces_a == [] and rest_a == (k(0), k(8)) and not past_a  # a hole: back off
    assert pieces_b == [] and rest_b == (k(10), k(12)) and past_b  # not scanned yet: ask again


def test_many_spans_share_one_lookup_and_each_gets_its_own_pieces():
    pd = FakePD([region(1, b"", k(10)), region(2, k(10), k(20)), region(3, k(20), k(40)), region(4, k(40), b"")],
                shuffle=True)
    spans = [(k(21), k(25)), (k(2), k(4)), (k(8), k(12)), (k(30), k(50))]
    taken, later = disjoint_batch(spans)
    assert later == [] and [spans[i] for i in taken] == sorted(spans)
    results = batch_regions_covering(pd, [(spans[i], spans[i]) for i in taken], 1024)
    assert len(pd.calls) == 1 and not any(past for _, _, past in results)
    assert [ids(p) for p, _, _ in results] == [
        [(1, (k(2), k(4)))], [(1, (k(8), k(10))), (2, (k(10), k(12)))], [(3, (k(21), k(25)))],
        [(3, (k(30), k(40))), (4, (k(40), k(50)))]]
    assert all(rest is None for _, rest, _ in results)


def test_overlapping_spans_wait_for_a_later_batch():
    spans = [(k(5), k(9)), (k(0), k(6)), (k(9), b""), (k(12), k(14)), (k(9), k(10))]
    taken, later = disjoint_batch(spans)
    assert [spans[i] for i in taken] == [(k(0), k(6)), (k(9), b"")]
    assert sorted(spans[i] for i in later) == [(k(5), k(9)), (k(9), k(10)), (k(12), k(14))]


def test_hole_returns_the_uncovered_remainder():
    pd = FakePD([region(1, k(0), k(10)), region(3, k(15), k(30))])  # [10, 15) is mid-split: no region
    pieces, rest, _ = regions_covering(pd, (k(2), k(20)), (k(2), k(20)))
    assert ids(pieces) == [(1, (k(2), k(10)))]
    assert rest == (k(10), k(20))


def test_overlapping_stale_region_cuts_the_prefix_and_is_rescanned():
    # PD briefly reports a stale region 2 [8, 20) overlapping region 1 [0, 10)
    pd = FakePD([region(1, k(0), k(10)), region(2, k(8), k(20)), region(4, k(20), k(30))])
    pieces, rest, _ = regions_covering(pd, (k(0), k(30)), (k(0), k(30)))
    assert rest is None
    # each piece is the whole region ∩ table span; the range lock arbitrates the overlap
    assert ids(pieces) == [(1, (k(0), k(10))), (2, (k(8), k(20))), (4, (k(20), k(30)))]
    lock = RangeLock(k(0), k(30), 5)
    results = [lock.lock(sub[0], sub[1], t.region.id, t.region.region_epoch.version) for t, sub in pieces]
    assert [r.kind for r in results] == ["locked", "stale", "locked"]
    assert results[1].retry == ((k(10), k(20)),)


def test_pieces_are_clipped_to_the_table_span_not_the_retried_part():
    pd = FakePD([region(4, k(0), k(20)), region(5, k(20), b"")])
    pieces, rest, _ = regions_covering(pd, (k(10), k(15)), (k(2), k(25)))
    assert rest is None and ids(pieces) == [(4, (k(2), k(20)))]


def test_regions_ending_at_or_before_the_span_start_are_ignored():
    pd = FakePD([region(1, k(0), k(5)), region(2, k(5), k(9))])
    pd.batch_scan_regions = lambda ranges, limit=1024: [region(1, k(0), k(5)), region(2, k(5), k(9))]
    pieces, rest, _ = regions_covering(pd, (k(5), k(9)), (k(5), k(9)))
    assert rest is None and ids(pieces) == [(2, (k(5), k(9)))]


def test_cut_requires_first_region_to_start_at_or_before_span():
    assert cut_regions_left_cover_span([region(1, k(5), k(10))], (k(4), k(9))) == []
    assert len(cut_regions_left_cover_span([region(1, k(4), k(10))], (k(4), k(9)))) == 1


def test_range_lock_checkpoint_is_min_of_the_covered_free_parts():
    lock = RangeLock(k(0), k(30), 100)
    a = lock.lock(k(0), k(30), 1, 1).locked
    lock.unlock(a, 300)
    b = lock.lock(k(0), k(10), 2, 2).locked  # split: left half
    assert b.checkpoint_ts == 300
    lock.unlock(b, 500)
    c = lock.lock(k(5), k(20), 3, 3).locked  # merged piece spans 500 and 300 parts
    assert c.checkpoint_ts == 300
    free = [(s, e, v) for s, e, v in lock.pieces() if not isinstance(v, LockedRange)]
    assert free == [(k(0), k(5), 500), (k(20), k(30), 300)]


def test_range_lock_stale_and_wait():
    lock = RangeLock(k(0), k(30), 100)
    old = lock.lock(k(10), k(20), 1, 5).locked
    stale = lock.lock(k(5), k(25), 2, 5)
    assert stale.kind == "stale" and stale.retry == ((k(5), k(10)), (k(20), k(25)))
    assert lock.lock(k(5), k(25), 3, 6).kind == "wait"
    lock.unlock(old, 150)
    newer = lock.lock(k(5), k(25), 3, 6)
    assert newer.kind == "locked" and newer.locked.checkpoint_ts == 100


def test_unlock_records_at_least_the_checkpoint_and_only_frees_its_own_range():
    lock = RangeLock(b"", b"", 100)
    a = lock.lock(b"", k(10), 1, 1).locked
    b = lock.lock(k(10), b"", 2, 1).locked
    lock.unlock(a, 50)  # never resolved above its start: keeps the checkpoint
    pieces = lock.pieces()
    assert pieces[0] == (b"", k(10), 100) and pieces[1][2] is b
    lock.unlock(a, 999)  # a second unlock of a freed range changes nothing
    assert lock.pieces()[0] == (b"", k(10), 100)
