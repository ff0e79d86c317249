import random

import pytest

from tidelake.capture.eventfeed.frontier import SpanFrontier


def k(i: int) -> bytes:
    return bytes([i])


def expand(frontier: SpanFrontier, lo: int, hi: int) -> list[int]:
    """ts of every one-byte key point in [lo, hi) according to the frontier's pieces."""
    out = []
    for point in range(lo, hi):
        key = k(point)
        ts = [t for s, e, t in frontier.spans() if s <= key and (not e or key < e)]
        assert len(ts) == 1, f"pieces must tile the span exactly once at {point}"
        out.append(ts[0])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_random_forwards_match_brute_force(seed):
    rng = random.Random(seed)
    lo, hi = 2, 40
    initial = rng.randrange(0, 5)
    frontier = SpanFrontier(k(lo), k(hi), initial)
    model = [initial] * (hi - lo)
    for _ in range(300):
        a = rng.randrange(0, hi + 3)
        b = rng.randrange(a + 1, hi + 5)
        end = b"" if rng.random() < 0.1 else k(b)
        ts = rng.randrange(0, 60)
        frontier.forward(k(a), end, ts)
        stop = hi if not end else min(b, hi)
        for point in range(max(a, lo), stop):
            model[point - lo] = ts
        assert frontier.frontier() == min(model)
    assert expand(frontier, lo, hi) == model


def test_rounds_over_the_same_regions_update_their_pieces_in_place():
    """Every region forwards its own piece each round, often to the same ts as its neighbours:
    the pieces stay one per region (no node added per round), and the frontier follows the slowest."""
    regions = [(k(0), k(10)), (k(10), k(20)), (k(20), k(30))]
    frontier = SpanFrontier(k(0), k(30), 1)
    for ts in range(2, 50):
        for i, (start, end) in enumerate(regions):
            frontier.forward(start, end, ts if i != 1 else ts - 1)
        assert frontier.frontier() == ts - 1
        assert [(s, e) for s, e, _ in frontier.spans()] == regions


def test_initial_ts_covers_whole_span_until_every_piece_resolves():
    frontier = SpanFrontier(k(10), k(20), 100)
    frontier.forward(k(10), k(15), 200)
    assert frontier.frontier() == 100  # [15, 20) never resolved: the table stays at its start ts
    frontier.forward(k(15), k(20), 150)
    assert frontier.frontier() == 150


def test_split_then_merge_of_region_boundaries():
    frontier = SpanFrontier(k(0), k(30), 1)
    frontier.forward(k(0), k(30), 10)  # one region
    frontier.forward(k(0), k(12), 20)  # split: left half resolves first
    assert frontier.frontier() == 10
    frontier.forward(k(12), k(30), 25)
    assert frontier.frontier() == 20
    frontier.forward(k(5), k(25), 30)  # merged region straddling the old boundary overwrites
    assert list(frontier.spans()) == [(k(0), k(5), 20), (k(5), k(25), 30), (k(25), k(30), 25)]
    assert frontier.frontier() == 20


def test_overwrite_can_lower_a_piece():
    frontier = SpanFrontier(k(0), k(10), 5)
    frontier.forward(k(0), k(10), 50)
    frontier.forward(k(3), k(4), 40)
    assert frontier.frontier() == 40


def test_unbounded_end_and_out_of_span_forward():
    frontier = SpanFrontier(k(5), b"", 7)
    frontier.forward(k(0), k(5), 100)  # entirely left of the span: ignored
    assert frontier.frontier() == 7
    frontier.forward(k(9), b"", 9)
    frontier.forward(k(5), k(9), 8)
    assert frontier.frontier() == 8
    assert list(frontier.spans()) == [(k(5), k(9), 8), (k(9), b"", 9)]
