"""Send one kvrpcpb request to the region holding a key, handling every region error.

This is client-go's `RegionRequestSender` + `onRegionError` (docs/metadata.md#region-errors-during-reads): the
caller builds the request for whatever region the key is in now, and gets back a response free
of region errors together with the region it was answered by (for its bounds).
Owner: the KV readers (kv_snapshot, lock_resolver, stale_locks).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, TypeVar

import grpc

from tidelake.config import TlsConfig
from tidelake.kvproto import errorpb_pb2, kvrpcpb_pb2, metapb_pb2, tikvpb_pb2_grpc
from tidelake.upstream.backoffer import Backoffer
from tidelake.upstream.channels import make_channel
from tidelake.upstream.pd_client import PDClient
from tidelake.upstream.region_cache import CachedRegion, RegionCache, RegionMiss
from tidelake.upstream.upstream_errors import UpstreamError

log = logging.getLogger(__name__)

Resp = TypeVar("Resp")
BuildRequest = Callable[[CachedRegion, kvrpcpb_pb2.Context], object]

_FATAL_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,  # e.g. cluster id mismatch (docs/metadata.md#kvrpcpbcontext)
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
}
# not_leader naming a leader is retried at once, but not forever if two stores disagree.
_MAX_LEADER_HOPS = 10


class StoreClients:
    """TiKV stubs per store id, address from PD `GetStore`; dropped when the store misbehaves."""

    def __init__(self, pd: PDClient, tls: TlsConfig | None) -> None:
        self._pd = pd
        self._tls = tls
        self._lock = threading.Lock()
        self._stubs: dict[int, tuple[grpc.Channel, tikvpb_pb2_grpc.TikvStub]] = {}

    def stub(self, store_id: int) -> tikvpb_pb2_grpc.TikvStub:
        with self._lock:
            entry = self._stubs.get(store_id)
        if entry is not None:
            return entry[1]
        store = self._pd.get_store(store_id)
        if store.state == metapb_pb2.Tombstone or not store.address:
            raise RegionMiss(f"store {store_id} is tombstone or has no address")
        channel = make_channel(store.address, self._tls)
        stub = tikvpb_pb2_grpc.TikvStub(channel)
        with self._lock:
            if store_id in self._stubs:
                channel.close()
                return self._stubs[store_id][1]
            self._stubs[store_id] = (channel, stub)
        return stub

    def invalidate(self, store_id: int) -> None:
        with self._lock:
            entry = self._stubs.pop(store_id, None)
        if entry is not None:
            entry[0].close()

    def close(self) -> None:
        with self._lock:
            entries, self._stubs = list(self._stubs.values()), {}
        for channel, _ in entries:
            channel.close()


class RegionRequestSender:
    def __init__(self, pd: PDClient, tls: TlsConfig | None, timeout_s: float = 30.0) -> None:
        self.pd = pd
        self.cache = RegionCache(pd)
        self.stores = StoreClients(pd, tls)
        self._timeout_s = timeout_s

    def send(self, key: bytes, method: str, build: BuildRequest, bo: Backoffer) -> tuple[object, CachedRegion]:
        """Call `method` (a Tikv RPC name) for the region holding raw `key` until no region error."""
        hops = 0
        while True:
            try:
                region = self.cache.locate(key)
                peer = region.target_peer()
                stub = self.stores.stub(peer.store_id)
            except RegionMiss as exc:
                bo.backoff("region_miss", str(exc))
                continue
            request = build(region, region.context(self.pd.cluster_id))
            try:
                response = getattr(stub, method)(request, timeout=self._timeout_s)
            except grpc.RpcError as exc:
                text = f"{method} to store {peer.store_id} (region {region.id}): {exc.code().name}: {exc.details()}"
                if exc.code() in _FATAL_CODES:
                    raise UpstreamError(text) from None
                self.stores.invalidate(peer.store_id)
                self.cache.invalidate(region.id)
                bo.backoff("tikv_rpc", text)
                continue
            if not response.HasField("region_error"):
                return response, region
            hops = self._on_region_error(region, peer, response.region_error, bo, hops)

    def _on_region_error(self, region: CachedRegion, peer: metapb_pb2.Peer, err: errorpb_pb2.Error,
                         bo: Backoffer, hops: int) -> int:
        """docs/metadata.md#region-errors-during-reads, client-go onRegionError; returns the leader-hop count."""
        what = f"region {region.id} on store {peer.store_id}: {_describe(err)}"
        if err.HasField("not_leader"):
            leader = err.not_leader.leader
            if leader.store_id and hops < _MAX_LEADER_HOPS and self.cache.update_leader(region.id, leader):
                return hops + 1  # new leader named: retry at once
            self.cache.invalidate(region.id)
            bo.backoff("region_scheduling", what)
            return 0
        if err.HasField("epoch_not_match"):
            current = list(err.epoch_not_match.current_regions)
            if current:
                self.cache.on_epoch_not_match(region, current)
                return hops  # split or merge: re-locate without backoff
            self.cache.invalidate(region.id)
            bo.backoff("region_miss", what)
            return hops
        if err.HasField("store_not_match"):
            self.stores.invalidate(peer.store_id)
            self.cache.invalidate(region.id)
            bo.backoff("region_miss", what)
            return hops
        if any(err.HasField(f) for f in ("region_not_found", "key_not_in_region", "mismatch_peer_id",
                                         "RecoveryInProgress", "is_witness", "bucket_version_not_match")):
            self.cache.invalidate(region.id)
            bo.backoff("region_miss", what)
            return hops
        if err.HasField("server_is_busy"):
            bo.backoff("tikv_server_busy", what, err.server_is_busy.backoff_ms / 1000)
            return hops
        if err.HasField("max_timestamp_not_synced"):
            bo.backoff("max_ts_not_synced", what)
            return hops
        if err.HasField("stale_command"):
            bo.backoff("stale_command", what)
            return hops
        if any(err.HasField(f) for f in ("read_index_not_ready", "proposal_in_merging_mode",
                                         "region_not_initialized", "data_is_not_ready", "disk_full")):
            bo.backoff("region_miss", what)
            return hops
        raise UpstreamError(f"TiKV refused the read: {what}")

    def close(self) -> None:
        self.stores.close()


def _describe(err: errorpb_pb2.Error) -> str:
    fields = [fd.name for fd, _ in err.ListFields() if fd.name != "message"]
    kind = fields[0] if fields else "error"
    return f"{kind}{': ' + err.message if err.message else ''}"
