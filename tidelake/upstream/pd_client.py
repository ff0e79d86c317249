"""PD client: member discovery, leader failover, TSO, regions, stores and GC safepoints.

It follows the Go PD client (docs/wire.md#pdpb-subset, docs/wire.md#pd-server-behaviour): GetMembers on the seed URLs gives the
cluster id (which every later request carries and which must agree across seeds) and the leader,
whose client URL is dialled; any transport error or "not leader" re-runs discovery and retries.
Owner: the upstream clients; every stage that talks to PD dials it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, TypeVar

import grpc
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    stop_when_event_set,
    wait_exponential_jitter,
)

from tidelake.config import TlsConfig
from tidelake.errors import StopRequested
from tidelake.kvproto import etcdserverpb_pb2_grpc, metapb_pb2, pdpb_pb2, pdpb_pb2_grpc
from tidelake.upstream.channels import make_channel, strip_scheme
from tidelake.upstream.tso_stream import TsoDispatcher, TsoStreamBroken
from tidelake.upstream.upstream_errors import EtcdApiUnavailable, UpstreamError

log = logging.getLogger(__name__)

T = TypeVar("T")

# gRPC codes that no retry or other PD member can fix.
_FATAL_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
}


@dataclass(frozen=True)
class RegionInfo:
    """A region (ENCODED bounds) and its leader peer as PD reports them; leader None if unknown."""

    region: metapb_pb2.Region
    leader: metapb_pb2.Peer | None


class _Transient(Exception):
    """A failure worth retrying after re-discovering the PD leader."""


class _Unimplemented(Exception):
    """The PD does not serve this RPC (an older version): the caller takes another way."""


class PDClient:
    """Thread-safe; one instance per process and cluster is enough."""

    def __init__(
        self,
        endpoints: list[str],
        tls: TlsConfig | None = None,
        caller_id: str = "tidelake",
        timeout_s: float = 10.0,
        retry_timeout_s: float = 60.0,
        cancel: threading.Event | None = None,
    ) -> None:
        """`cancel`, once set, ends retrying: a request gets one attempt (up to `timeout_s`) and
        then fails with StopRequested, so a stopping puller never waits out the retry
        budget, yet its last GC safepoint update still goes out when PD answers."""
        if not endpoints:
            raise UpstreamError("no PD endpoints given")
        self._urls = list(dict.fromkeys(strip_scheme(e) for e in endpoints))
        self._tls = tls
        self._caller_id = caller_id
        self._timeout_s = timeout_s
        self._retry_timeout_s = retry_timeout_s
        self.cancel = cancel if cancel is not None else threading.Event()
        self._lock = threading.RLock()
        self._channels: dict[str, grpc.Channel] = {}
        self._leader_url: str | None = None
        self._stub: pdpb_pb2_grpc.PDStub | None = None
        self.cluster_id = 0
        self._batch_scan = True  # until PD answers BatchScanRegions with Unimplemented
        self._with_retries("GetMembers", self._discover)
        self._tso = TsoDispatcher(self._open_tso_stream, self._header, self._forget_leader)

    # --- discovery -------------------------------------------------------------------------

    def _channel(self, url: str) -> grpc.Channel:
        channel = self._channels.get(url)
        if channel is None:
            channel = self._channels[url] = make_channel(url, self._tls)
        return channel

    def _discover(self) -> None:
        """GetMembers on every known URL; same cluster id everywhere; dial the leader."""
        ids: dict[int, str] = {}
        leader_urls: list[str] = []
        members: list[str] = []
        errors: list[str] = []
        for url in list(self._urls):
            stub = pdpb_pb2_grpc.PDStub(self._channel(url))
            try:
                # GetMembers is not checked against the cluster id (docs/wire.md#pd-server-behaviour).
                resp = stub.GetMembers(pdpb_pb2.GetMembersRequest(header=self._header()), timeout=self._timeout_s)
            except grpc.RpcError as exc:
                errors.append(f"{url}: {_rpc_text(exc)}")
                continue
            if resp.header.error.type != pdpb_pb2.OK:
                errors.append(f"{url}: {_header_error(resp.header)}")
                continue
            ids.setdefault(resp.header.cluster_id, url)
            if not leader_urls and resp.leader.client_urls:
                leader_urls = [strip_scheme(u) for u in resp.leader.client_urls]
            members += [strip_scheme(u) for m in resp.members for u in m.client_urls]
        if len(ids) > 1:
            described = ", ".join(f"{url} has cluster id {cid}" for cid, url in ids.items())
            raise UpstreamError(f"PD endpoints belong to different clusters: {described}")
        if not ids:
            raise _Transient("no PD endpoint answered GetMembers (" + "; ".join(errors) + ")")
        cluster_id = next(iter(ids))
        if self.cluster_id and cluster_id != self.cluster_id:
            raise UpstreamError(f"PD cluster id changed from {self.cluster_id} to {cluster_id}: wrong endpoints?")
        if not leader_urls:
            raise _Transient("PD has no leader yet (GetMembers returned no leader client URL)")
        self.cluster_id = cluster_id
        self._urls = list(dict.fromkeys(self._urls + members))
        self._leader_url = leader_urls[0]
        self._stub = pdpb_pb2_grpc.PDStub(self._channel(self._leader_url))
        self._check_service_mode()
        log.info("PD cluster %d, leader %s", cluster_id, self._leader_url)

    def _check_service_mode(self) -> None:
        """GetClusterInfo: `Unimplemented` means an older PD, which is plain PD mode (docs/wire.md#pd-server-behaviour)."""
        try:
            self._stub.GetClusterInfo(
                pdpb_pb2.GetClusterInfoRequest(header=pdpb_pb2.ResponseHeader(cluster_id=self.cluster_id)),
                timeout=self._timeout_s,
            )
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise _Transient(f"GetClusterInfo on {self._leader_url}: {_rpc_text(exc)}") from None

    def _forget_leader(self) -> None:
        with self._lock:
            self._stub = None

    def _leader_stub(self) -> pdpb_pb2_grpc.PDStub:
        with self._lock:
            if self._stub is None:
                self._discover()
            return self._stub

    @property
    def leader_url(self) -> str | None:
        return self._leader_url

    # --- request plumbing ------------------------------------------------------------------

    def _header(self) -> pdpb_pb2.RequestHeader:
        return pdpb_pb2.RequestHeader(cluster_id=self.cluster_id, caller_id=self._caller_id)

    def _with_retries(self, what: str, fn: Callable[[], T]) -> T:
        retrying = Retrying(
            stop=stop_after_delay(self._retry_timeout_s) | stop_when_event_set(self.cancel),
            wait=wait_exponential_jitter(multiplier=0.05, max=2.0, jitter=0.05),
            retry=retry_if_exception_type((_Transient, TsoStreamBroken)),
            sleep=self.cancel.wait,
            reraise=True,
        )
        try:
            return retrying(fn)
        except (_Transient, TsoStreamBroken) as exc:
            if self.cancel.is_set():
                raise StopRequested(f"PD {what} given up on stop: {exc}") from None
            raise UpstreamError(f"PD {what} failed for {self._retry_timeout_s:g}s: {exc}") from None

    def _call(self, method: str, request, accept: Callable[[pdpb_pb2.ResponseHeader], bool] = lambda h: False,
              unimplemented_ok: bool = False):
        """Unary call on the leader with header filled in; header errors raise unless accepted.
        With `unimplemented_ok`, an `Unimplemented` answer raises _Unimplemented instead."""

        def attempt():
            stub = self._leader_stub()
            request.header.CopyFrom(self._header())
            try:
                response = getattr(stub, method)(request, timeout=self._timeout_s)
            except grpc.RpcError as exc:
                if unimplemented_ok and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise _Unimplemented(method) from None
                if exc.code() in _FATAL_CODES:
                    raise UpstreamError(f"PD {method} on {self._leader_url}: {_rpc_text(exc)}") from None
                self._forget_leader()  # "not leader", unavailable, deadline: re-discover
                raise _Transient(f"{self._leader_url}: {_rpc_text(exc)}") from None
            header = response.header
            if header.error.type != pdpb_pb2.OK and not accept(header):
                if header.error.type == pdpb_pb2.NOT_BOOTSTRAPPED:
                    raise _Transient(_header_error(header))
                raise UpstreamError(f"PD {method}: {_header_error(header)}")
            return response

        return self._with_retries(method, attempt)

    # --- TSO -------------------------------------------------------------------------------

    def _open_tso_stream(self, requests):
        return self._leader_stub().Tso(requests)

    def get_ts(self) -> int:
        """A fresh TSO, strictly greater than every TSO this client returned before."""
        return self._with_retries("Tso", lambda: self._tso.get_ts(self._timeout_s))

    # --- regions ---------------------------------------------------------------------------

    def get_region(self, encoded_key: bytes) -> RegionInfo | None:
        """The region containing an ENCODED key (EncodeBytes of the raw key), or None."""
        resp = self._call("GetRegion", pdpb_pb2.GetRegionRequest(region_key=encoded_key), _region_not_found)
        return _region_info(resp)

    def get_region_by_id(self, region_id: int) -> RegionInfo | None:
        resp = self._call("GetRegionByID", pdpb_pb2.GetRegionByIDRequest(region_id=region_id), _region_not_found)
        return _region_info(resp)

    def scan_regions(self, start_enc: bytes, end_enc: bytes, limit: int = 1024) -> list[RegionInfo]:
        """Regions overlapping [start_enc, end_enc) in key order (empty end = +inf), up to limit."""
        resp = self._call("ScanRegions", pdpb_pb2.ScanRegionsRequest(start_key=start_enc, end_key=end_enc, limit=limit))
        if resp.regions:  # the Go client prefers the extended form (docs/wire.md#pd-server-behaviour)
            return [RegionInfo(r.region, _peer_or_none(r.leader)) for r in resp.regions]
        leaders = list(resp.leaders)
        return [
            RegionInfo(meta, _peer_or_none(leaders[i]) if i < len(leaders) else None)
            for i, meta in enumerate(resp.region_metas)
        ]

    def batch_scan_regions(self, ranges: list[tuple[bytes, bytes]], limit: int = 1024) -> list[RegionInfo]:
        """Regions overlapping any of `ranges` (ENCODED, sorted, non-overlapping; empty end = +inf)
        in key order, each once, at most `limit` in all: one `BatchScanRegions` for many spans,
        as client-go's region cache loads them (docs/wire.md#pd-server-behaviour). A PD without the RPC
        (`Unimplemented`) is asked with one `ScanRegions` per range instead, as client-go falls back."""
        if not ranges:
            return []
        if self._batch_scan:
            request = pdpb_pb2.BatchScanRegionsRequest(
                ranges=[pdpb_pb2.KeyRange(start_key=s, end_key=e) for s, e in ranges], limit=limit)
            try:
                resp = self._call("BatchScanRegions", request, unimplemented_ok=True)
            except _Unimplemented:
                log.info("PD %s has no BatchScanRegions; using ScanRegions", self._leader_url)
                self._batch_scan = False
            else:
                return [RegionInfo(r.region, _peer_or_none(r.leader)) for r in resp.regions]
        out: list[RegionInfo] = []
        seen: set[int] = set()
        for start, end in ranges:
            for info in self.scan_regions(start, end, limit - len(out)):
                if info.region.id not in seen:
                    seen.add(info.region.id)
                    out.append(info)
            if len(out) >= limit:
                break
        return out

    # --- stores ----------------------------------------------------------------------------

    def get_store(self, store_id: int) -> metapb_pb2.Store:
        return self._call("GetStore", pdpb_pb2.GetStoreRequest(store_id=store_id)).store

    def get_all_stores(self, exclude_tombstone: bool = True) -> list[metapb_pb2.Store]:
        resp = self._call("GetAllStores", pdpb_pb2.GetAllStoresRequest(exclude_tombstone_stores=exclude_tombstone))
        return list(resp.stores)

    # --- GC --------------------------------------------------------------------------------

    def update_service_gc_safepoint(self, service_id: str, ttl_s: int, safe_point: int) -> int:
        """Set (ttl > 0) or remove (ttl <= 0) a service safepoint; returns PD's minimum over all
        services. PD refuses silently: a returned minimum above `safe_point` means refused (docs/metadata.md#server-semantics)."""
        request = pdpb_pb2.UpdateServiceGCSafePointRequest(
            service_id=service_id.encode(), TTL=ttl_s, safe_point=safe_point
        )
        return self._call("UpdateServiceGCSafePoint", request).min_safe_point

    def get_gc_safepoint(self) -> int:
        """The cluster GC safepoint: versions below it may already be collected."""
        return self._call("GetGCSafePoint", pdpb_pb2.GetGCSafePointRequest()).safe_point

    # --- PD's embedded etcd -----------------------------------------------------------------

    def etcd(self, method: str, request):
        """A unary call of etcd's KV service on the PD leader's client URL, which PD's embedded etcd
        serves (docs/wire.md#pds-etcd-kv); retried and re-discovered like PD's own calls. A PD that
        does not expose it (UNIMPLEMENTED, e.g. behind a gRPC proxy) raises EtcdApiUnavailable."""

        def attempt():
            with self._lock:
                if self._stub is None:
                    self._discover()
                url = self._leader_url
                stub = etcdserverpb_pb2_grpc.KVStub(self._channel(url))
            try:
                return getattr(stub, method)(request, timeout=self._timeout_s)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise EtcdApiUnavailable(f"PD {url} does not serve etcd's KV/{method}: {_rpc_text(exc)}") from None
                if exc.code() in _FATAL_CODES:
                    raise UpstreamError(f"PD's etcd KV/{method} on {url}: {_rpc_text(exc)}") from None
                self._forget_leader()
                raise _Transient(f"{url}: {_rpc_text(exc)}") from None

        return self._with_retries(f"etcd KV/{method}", attempt)

    def close(self) -> None:
        self._tso.close()
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stub = None

    def __enter__(self) -> "PDClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _region_not_found(header: pdpb_pb2.ResponseHeader) -> bool:
    return header.error.type == pdpb_pb2.REGION_NOT_FOUND


def _region_info(resp: pdpb_pb2.GetRegionResponse) -> RegionInfo | None:
    if not resp.HasField("region") or resp.header.error.type == pdpb_pb2.REGION_NOT_FOUND:
        return None
    return RegionInfo(resp.region, _peer_or_none(resp.leader) if resp.HasField("leader") else None)


def _peer_or_none(peer: metapb_pb2.Peer) -> metapb_pb2.Peer | None:
    return peer if peer.id or peer.store_id else None


def _header_error(header: pdpb_pb2.ResponseHeader) -> str:
    return f"{pdpb_pb2.ErrorType.Name(header.error.type)}: {header.error.message}"


def _rpc_text(exc: grpc.RpcError) -> str:
    return f"{exc.code().name}: {exc.details()}"
