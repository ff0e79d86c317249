"""Regions by RAW key for KV reads: PD answers in encoded keys, kvrpcpb speaks raw keys.

client-go decodes region bounds with DecodeBytes before comparing them with request keys
(docs/metadata.md#tikv-read-semantics); keeping decoded bounds here means the scan loop only ever
compares raw keys. Owner: the KV readers (tidelake.upstream.kv_snapshot, region_request).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from sortedcontainers import SortedDict

from tidelake.codec.memcomparable_bytes import decode_bytes, encode_bytes
from tidelake.errors import InputError
from tidelake.kvproto import kvrpcpb_pb2, metapb_pb2
from tidelake.upstream.pd_client import PDClient, RegionInfo
from tidelake.upstream.upstream_errors import UpstreamError


class RegionMiss(Exception):
    """PD has no region for a key right now (e.g. mid-split); retry after a short backoff."""


@dataclass(frozen=True)
class CachedRegion:
    region: metapb_pb2.Region
    leader: metapb_pb2.Peer | None
    start: bytes  # raw, inclusive
    end: bytes | None  # raw, exclusive; None = +inf

    @property
    def id(self) -> int:
        return self.region.id

    def contains(self, raw_key: bytes) -> bool:
        return self.start <= raw_key and (self.end is None or raw_key < self.end)

    def target_peer(self) -> metapb_pb2.Peer:
        """The leader, or any peer when PD does not know it (the store names it via not_leader)."""
        if self.leader is not None:
            return self.leader
        if not self.region.peers:
            raise UpstreamError(f"region {self.id} has no peers in PD")
        return self.region.peers[0]

    def context(self, cluster_id: int) -> kvrpcpb_pb2.Context:
        # docs/metadata.md#kvrpcpbcontext: epoch from PD, leader peer, SI isolation (RC skips locks).
        return kvrpcpb_pb2.Context(
            region_id=self.id,
            region_epoch=self.region.region_epoch,
            peer=self.target_peer(),
            isolation_level=kvrpcpb_pb2.SI,
            cluster_id=cluster_id,
        )


def decode_region(info: RegionInfo) -> CachedRegion:
    """Decode encoded region bounds (docs/metadata.md#tikv-read-semantics)."""
    region = info.region
    try:
        start = decode_bytes(region.start_key)[0] if region.start_key else b""
        end = decode_bytes(region.end_key)[0] if region.end_key else None
    except InputError as exc:
        raise UpstreamError(f"region {region.id} has a bound that is not a memcomparable key: {exc}") from None
    return CachedRegion(region, info.leader, start, end)


class RegionCache:
    """Thread-safe cache of non-overlapping regions keyed by raw start key."""

    def __init__(self, pd: PDClient) -> None:
        self._pd = pd
        self._lock = threading.Lock()
        self._by_start: SortedDict = SortedDict()
        self._by_id: dict[int, CachedRegion] = {}

    def locate(self, raw_key: bytes) -> CachedRegion:
        with self._lock:
            idx = self._by_start.bisect_right(raw_key) - 1
            if idx >= 0:
                cached = self._by_start.peekitem(idx)[1]
                if cached.contains(raw_key):
                    return cached
        info = self._pd.get_region(encode_bytes(raw_key))
        if info is None:
            raise RegionMiss(f"PD has no region for key {raw_key.hex()}")
        region = decode_region(info)
        if not region.contains(raw_key):
            raise RegionMiss(f"PD returned region {region.id} not containing key {raw_key.hex()}")
        self._insert(region)
        return region

    def _insert(self, region: CachedRegion) -> None:
        with self._lock:
            for other in list(self._by_id.values()):
                if _overlaps(other, region):
                    self._drop(other)
            self._by_start[region.start] = region
            self._by_id[region.id] = region

    def _drop(self, region: CachedRegion) -> None:
        self._by_id.pop(region.id, None)
        if self._by_start.get(region.start) is region:
            del self._by_start[region.start]

    def invalidate(self, region_id: int) -> None:
        with self._lock:
            cached = self._by_id.get(region_id)
            if cached is not None:
                self._drop(cached)

    def update_leader(self, region_id: int, leader: metapb_pb2.Peer) -> bool:
        """Point a cached region at the leader a not_leader error named; False if not a peer."""
        with self._lock:
            cached = self._by_id.get(region_id)
            if cached is None:
                return False
            peer = next((p for p in cached.region.peers if p.store_id == leader.store_id), None)
            if peer is None:
                self._drop(cached)
                return False
            updated = CachedRegion(cached.region, peer, cached.start, cached.end)
            self._by_id[region_id] = updated
            self._by_start[cached.start] = updated
            return True

    def on_epoch_not_match(self, stale: CachedRegion, current: list[metapb_pb2.Region]) -> None:
        """Replace a region with the metas TiKV sent; keep the leader on the same store (client-go)."""
        self.invalidate(stale.id)
        store = stale.leader.store_id if stale.leader is not None else None
        for meta in current:
            leader = next((p for p in meta.peers if p.store_id == store), None)
            self._insert(decode_region(RegionInfo(meta, leader)))


def _overlaps(a: CachedRegion, b: CachedRegion) -> bool:
    a_before_b_end = b.end is None or a.start < b.end
    b_before_a_end = a.end is None or b.start < a.end
    return a_before_b_end and b_before_a_end
