"""Which store leads which key range: the simulator's view of PD's region metadata.

Region boundaries are memcomparable-ENCODED keys, as PD stores them (docs/encoding.md#raw-keys-and-encoded-keys-pd-regions-cdc); the
MVCC data underneath is keyed by raw keys, so `raw_bound` translates a boundary into the raw space.
Epochs follow raftstore: `version` bumps on split and merge, `conf_ver` on peer changes
(docs/wire.md#metapb-subset). Listeners see every change in order; the CDC servicer turns them into the
errors TiKV sends (docs/wire.md#errors-raised-after-registration).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Literal

from sortedcontainers import SortedDict

from tidelake.codec.keys import table_split_key
from tidelake.codec.memcomparable_bytes import decode_bytes
from tidelake.errors import InputError
from tidelake.kvproto import metapb_pb2

_GROUP = 9  # 8 data bytes + marker (docs/encoding.md#comparable-bytes)


@dataclass(frozen=True)
class SimRegion:
    id: int
    start_key: bytes  # encoded, b"" = -inf
    end_key: bytes  # encoded, b"" = +inf
    conf_ver: int
    version: int
    peers: tuple[tuple[int, int], ...]  # (peer_id, store_id)
    leader_store_id: int

    def to_pb(self) -> metapb_pb2.Region:
        return metapb_pb2.Region(
            id=self.id, start_key=self.start_key, end_key=self.end_key,
            region_epoch=metapb_pb2.RegionEpoch(conf_ver=self.conf_ver, version=self.version),
            peers=[metapb_pb2.Peer(id=pid, store_id=sid) for pid, sid in self.peers])

    def peer_on(self, store_id: int) -> metapb_pb2.Peer | None:
        for pid, sid in self.peers:
            if sid == store_id:
                return metapb_pb2.Peer(id=pid, store_id=sid)
        return None

    def leader_peer(self) -> metapb_pb2.Peer:
        peer = self.peer_on(self.leader_store_id)
        assert peer is not None, f"region {self.id} leader store {self.leader_store_id} has no peer"
        return peer

    def store_ids(self) -> list[int]:
        return [sid for _, sid in self.peers]

    def contains(self, encoded_key: bytes) -> bool:
        return self.start_key <= encoded_key and (not self.end_key or encoded_key < self.end_key)

    def raw_range(self) -> tuple[bytes, bytes]:
        """[start, end) in raw key space (b"" = unbounded) for reading the MVCC store."""
        return raw_bound(self.start_key), raw_bound(self.end_key)


@dataclass(frozen=True)
class RegionChange:
    """'split' / 'merge': old regions replaced by new ones; 'leader': leader moved (old=[before], new=[after]);
    'removed': a peer left a store by a conf change (compare old[0].peers with new[0].peers)."""

    kind: Literal["split", "merge", "leader", "removed"]
    old: list[SimRegion] = field(default_factory=list)
    new: list[SimRegion] = field(default_factory=list)


Listener = Callable[[RegionChange], None]


def raw_bound(encoded: bytes) -> bytes:
    """The smallest raw key r with EncodeBytes(r) >= encoded (b"" stays unbounded).

    For a well-formed encoded key this is its decoding. Clients may send other bytes as bounds
    (TiCDC's `HackSpan` uses ff ff ff ff ff for +inf), so a malformed tail is mapped to the raw key
    where the encoded order crosses it: then `raw < raw_bound(e)  <=>  EncodeBytes(raw) < e`.
    """
    raw = bytearray()
    pos = 0
    while pos < len(encoded):
        group = encoded[pos:pos + _GROUP]
        if len(group) == _GROUP and group[8] == 0xFF:
            raw += group[:8]
            pos += _GROUP
            continue
        try:
            tail, end = decode_bytes(encoded, pos)
        except InputError:
            return bytes(raw) + _raw_bound_of_partial_group(group)
        if end == len(encoded):
            return bytes(raw) + tail
        return bytes(raw) + tail + b"\x00"  # a longer key sorts right after its complete prefix
    return bytes(raw)


def _raw_bound_of_partial_group(group: bytes) -> bytes:
    """Smallest raw y whose first encoded group sorts at or above a malformed/truncated `group`."""
    data = group[:8]
    if len(group) < _GROUP:
        return data.rstrip(b"\x00")  # y padded with zeros must reach `data`
    marker = group[8]
    for k in range(8):  # shorter y = data[:k] works if the padding matches and its marker sorts higher
        if not any(data[k:]) and 0xFF - (8 - k) > marker:
            return data[:k]
    return data


class RegionMap:
    def __init__(self, store_ids: list[int], *, first_id: int | None = None, max_replicas: int = 3) -> None:
        if not store_ids:
            raise InputError("a cluster needs at least one store")
        self._mu = threading.RLock()
        self._store_ids = sorted(store_ids)
        self._replicas = min(max_replicas, len(store_ids))
        self._next_id = first_id if first_id is not None else max(store_ids) + 1
        self._starts = SortedDict()  # start_key -> region id
        self._regions: dict[int, SimRegion] = {}
        # Peers and leaders per store, kept as regions change, so placing a split's peers does not
        # walk every region (10,000-region clusters split thousands of times at setup).
        self._peer_count: Counter[int] = Counter()
        self._leader_count: Counter[int] = Counter()
        self._listeners: list[Listener] = []
        stores = self._placement()
        first = SimRegion(self._alloc(), b"", b"", 1, 1, tuple((self._alloc(), s) for s in stores), stores[0])
        self._put(first)

    # ---- queries ---------------------------------------------------------------------------

    def locate(self, encoded_key: bytes) -> SimRegion:
        with self._mu:
            idx = self._starts.bisect_right(encoded_key) - 1
            return self._regions[self._starts.values()[idx]]

    def get(self, region_id: int) -> SimRegion | None:
        with self._mu:
            return self._regions.get(region_id)

    def prev(self, region: SimRegion) -> SimRegion | None:
        """The region ending where `region` starts (PD GetPrevRegion)."""
        with self._mu:
            idx = self._starts.bisect_left(region.start_key)
            if idx == 0:
                return None
            return self._regions[self._starts.values()[idx - 1]]

    def scan(self, start_enc: bytes, end_enc: bytes, limit: int = 0) -> list[SimRegion]:
        """Regions overlapping [start_enc, end_enc) in key order (end b"" = +inf, limit <= 0 = all)."""
        with self._mu:
            idx = self._starts.bisect_right(start_enc) - 1
            out = []
            for start in self._starts.islice(idx):  # not values()[idx:], which copies the whole tail
                region = self._regions[self._starts[start]]
                if end_enc and region.start_key >= end_enc:
                    break
                out.append(region)
                if 0 < limit <= len(out):
                    break
            return out

    def all(self) -> list[SimRegion]:
        return self.scan(b"", b"")

    def leaders_on(self, store_id: int) -> list[SimRegion]:
        with self._mu:
            return [r for r in self.all() if r.leader_store_id == store_id]

    def store_ids(self) -> list[int]:
        return list(self._store_ids)

    # ---- changes ---------------------------------------------------------------------------

    def add_listener(self, fn: Listener) -> None:
        with self._mu:
            self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        with self._mu:
            self._listeners.remove(fn)

    def split(self, region_id: int, split_enc_key: bytes) -> tuple[SimRegion, SimRegion]:
        """Split like raftstore with right-derive (TiKV default): the old id keeps the right part."""
        with self._mu:
            region = self._require(region_id)
            if split_enc_key <= region.start_key or (region.end_key and split_enc_key >= region.end_key):
                raise InputError(f"split key {split_enc_key.hex()} is not strictly inside region {region_id}")
            version = region.version + 1
            stores = self._placement()
            left = SimRegion(self._alloc(), region.start_key, split_enc_key, region.conf_ver, version,
                             tuple((self._alloc(), s) for s in stores), self._least_leaders(stores))
            right = replace(region, start_key=split_enc_key, version=version)
            self._put(left)
            self._put(right)
            self._emit(RegionChange("split", [region], [left, right]))
            return left, right

    def split_table(self, table_id: int) -> SimRegion:
        """Make a region start at the table boundary (TiDB splits there on CREATE TABLE); returns it."""
        key = table_split_key(table_id)
        with self._mu:
            region = self.locate(key)
            if region.start_key == key:
                return region
            return self.split(region.id, key)[1]

    def merge(self, left_id: int, right_id: int) -> SimRegion:
        """Merge `right` into its left neighbour; the result keeps left's id and peers."""
        with self._mu:
            left, right = self._require(left_id), self._require(right_id)
            if left.end_key != right.start_key or not left.end_key:
                raise InputError(f"regions {left_id} and {right_id} are not adjacent (left, right)")
            merged = replace(left, end_key=right.end_key, version=max(left.version, right.version) + 1)
            self._count(right, -1)
            del self._regions[right_id]
            del self._starts[right.start_key]
            self._put(merged)
            self._emit(RegionChange("merge", [left, right], [merged]))
            return merged

    def transfer_leader(self, region_id: int, store_id: int) -> SimRegion:
        with self._mu:
            region = self._require(region_id)
            if region.peer_on(store_id) is None:
                raise InputError(f"region {region_id} has no peer on store {store_id}")
            if region.leader_store_id == store_id:
                return region
            moved = replace(region, leader_store_id=store_id)
            self._put(moved)
            self._emit(RegionChange("leader", [region], [moved]))
            return moved

    def move_peer(self, region_id: int, from_store: int, to_store: int) -> SimRegion:
        """Add a peer on `to_store` then remove the one on `from_store` (conf_ver +2, as two conf changes)."""
        with self._mu:
            region = self._require(region_id)
            if region.peer_on(from_store) is None or region.peer_on(to_store) is not None:
                raise InputError(f"region {region_id}: cannot move a peer from store {from_store} to {to_store}")
            if to_store not in self._store_ids:
                raise InputError(f"unknown store {to_store}")
            peers = tuple(p for p in region.peers if p[1] != from_store) + ((self._alloc(), to_store),)
            leader = to_store if region.leader_store_id == from_store else region.leader_store_id
            moved = replace(region, peers=peers, conf_ver=region.conf_ver + 2, leader_store_id=leader)
            self._put(moved)
            self._emit(RegionChange("removed", [region], [moved]))
            return moved

    # ---- internals -------------------------------------------------------------------------

    def _alloc(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _require(self, region_id: int) -> SimRegion:
        region = self._regions.get(region_id)
        if region is None:
            raise InputError(f"unknown region {region_id}")
        return region

    def _put(self, region: SimRegion) -> None:
        old = self._regions.get(region.id)
        if old is not None:
            self._count(old, -1)
        self._count(region, 1)
        self._regions[region.id] = region
        self._starts[region.start_key] = region.id

    def _count(self, region: SimRegion, sign: int) -> None:
        for _, sid in region.peers:
            self._peer_count[sid] += sign
        self._leader_count[region.leader_store_id] += sign

    def _emit(self, change: RegionChange) -> None:
        for fn in list(self._listeners):
            fn(change)

    def _placement(self) -> list[int]:
        """Stores for a new region's peers: the fewest peers first, like PD's balance-region outcome."""
        return sorted(self._store_ids, key=lambda s: (self._peer_count[s], s))[: self._replicas]

    def _least_leaders(self, stores: list[int]) -> int:
        return min(stores, key=lambda s: (self._leader_count[s], s))

