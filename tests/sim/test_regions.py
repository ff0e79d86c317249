"""RegionMap: encoded boundaries, raftstore epochs, placement and listener events."""

from __future__ import annotations

import random

import pytest

from tidelake.codec.keys import record_key, table_prefix, table_split_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.errors import InputError
from tidelake.sim.regions import RegionChange, RegionMap, raw_bound


@pytest.fixture
def events() -> list[RegionChange]:
    return []


@pytest.fixture
def rmap(events) -> RegionMap:
    m = RegionMap([1, 2, 3, 4])
    m.add_listener(events.append)
    return m


def test_initial_region_covers_everything_with_three_peers(rmap):
    (region,) = rmap.all()
    assert (region.start_key, region.end_key, region.version, region.conf_ver) == (b"", b"", 1, 1)
    assert sorted(region.store_ids()) == [1, 2, 3]
    pb = region.to_pb()
    assert pb.region_epoch.version == 1 and len(pb.peers) == 3
    assert region.leader_peer().store_id == region.leader_store_id


def test_split_table_right_derive_and_epochs(rmap, events):
    original = rmap.all()[0]
    region = rmap.split_table(100)
    assert region.start_key == table_split_key(100) == encode_bytes(table_prefix(100))
    assert region.id == original.id and region.version == 2  # right part keeps the id (right-derive)
    left = rmap.locate(b"")
    assert left.end_key == region.start_key and left.version == 2 and left.id != original.id
    assert rmap.split_table(100) == region  # already a boundary: no new split
    assert [e.kind for e in events] == ["split"]
    assert events[0].old == [original] and events[0].new == [left, region]
    assert rmap.locate(encode_bytes(record_key(100, 5))) == region
    assert rmap.prev(region) == left and rmap.prev(left) is None


def test_new_regions_spread_over_stores(rmap):
    for tid in range(100, 112):
        rmap.split_table(tid)
    peers = [s for r in rmap.all() for s in r.store_ids()]
    counts = [peers.count(s) for s in (1, 2, 3, 4)]
    assert max(counts) - min(counts) <= 1
    leaders = [r.leader_store_id for r in rmap.all()]
    assert max(leaders.count(s) for s in (1, 2, 3, 4)) - min(leaders.count(s) for s in (1, 2, 3, 4)) <= 2


def test_merge_bumps_version_and_removes_source(rmap, events):
    rmap.split_table(100)
    left, right = rmap.all()
    merged = rmap.merge(left.id, right.id)
    assert (merged.id, merged.start_key, merged.end_key) == (left.id, b"", b"")
    assert merged.version == max(left.version, right.version) + 1
    assert rmap.get(right.id) is None and rmap.all() == [merged]
    assert events[-1].kind == "merge" and events[-1].old == [left, right]
    with pytest.raises(InputError):
        rmap.merge(merged.id, merged.id)


def test_leader_transfer_and_peer_move(rmap, events):
    region = rmap.all()[0]
    target = next(s for s in region.store_ids() if s != region.leader_store_id)
    moved = rmap.transfer_leader(region.id, target)
    assert moved.leader_store_id == target and moved.version == region.version and moved.conf_ver == region.conf_ver
    assert rmap.leaders_on(target) == [moved]
    with pytest.raises(InputError):
        rmap.transfer_leader(region.id, 4)
    spare = next(s for s in (1, 2, 3, 4) if s not in moved.store_ids())
    after = rmap.move_peer(region.id, target, spare)
    assert after.conf_ver == moved.conf_ver + 2 and spare in after.store_ids() and target not in after.store_ids()
    assert after.leader_store_id == spare
    assert [e.kind for e in events] == ["leader", "removed"]


def test_scan_limits_and_bounds(rmap):
    for tid in (100, 200, 300):
        rmap.split_table(tid)
    regions = rmap.all()
    assert len(regions) == 4
    assert rmap.scan(table_split_key(150), table_split_key(250)) == regions[1:3]
    assert rmap.scan(b"", b"", limit=2) == regions[:2]
    assert rmap.scan(table_split_key(300), b"") == regions[3:]


def test_raw_bound_of_well_formed_keys_is_their_decoding():
    for raw in (b"", b"t", b"abcdefgh", b"abcdefgh\x00", table_prefix(7)):
        assert raw_bound(encode_bytes(raw)) == raw or raw == b""


def test_raw_bound_orders_like_encoded_keys_for_any_bytes():
    rng = random.Random(7)
    raws = sorted({bytes(rng.choice(b"\x00\x01ab\xfe\xff") for _ in range(rng.randrange(0, 18))) for _ in range(300)})
    bounds = [b"\xff\xff\xff\xff\xff", b"ab\x00", b"ab\x00\x00\x00\x00\x00\x00\xf0", b"a\x01\x00\x00\x00\x00\x00\x00\xf9"]
    bounds += [encode_bytes(r)[:n] for r in raws[:40] for n in (3, 9, 12)] + [encode_bytes(r) + b"\x01" for r in raws[:20]]
    for bound in bounds:
        rb = raw_bound(bound)
        for raw in raws:
            assert (raw < rb) == (encode_bytes(raw) < bound), (bound.hex(), raw.hex(), rb.hex())
