"""The simulated PD's gRPC servicer (`pdpb.PD`), answering as tikv/pd does (docs/wire.md#pdpb-subset, docs/wire.md#pd-server-behaviour).

A single PD member that is always the leader. It reads cluster state (TSO, regions, stores, GC
safepoints) from the SimCluster, so what clients learn here always matches what the stores serve.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import grpc

from tidelake.kvproto import metapb_pb2, pdpb_pb2, pdpb_pb2_grpc
from tidelake.sim.regions import SimRegion
from tidelake.tso import logical, physical_ms

if TYPE_CHECKING:
    from tidelake.sim.cluster_view import ClusterView

PD_MEMBER_ID = 1
PD_MEMBER_NAME = "pd-sim-1"


class PdService(pdpb_pb2_grpc.PDServicer):
    def __init__(self, cluster: ClusterView) -> None:
        self._cluster = cluster

    # ---- helpers ---------------------------------------------------------------------------

    def _header(self, error_type: int = pdpb_pb2.OK, message: str = "") -> pdpb_pb2.ResponseHeader:
        header = pdpb_pb2.ResponseHeader(cluster_id=self._cluster.cluster_id)
        if error_type != pdpb_pb2.OK:
            header.error.type = error_type
            header.error.message = message
        return header

    def _validate(self, header: pdpb_pb2.RequestHeader, context: grpc.ServicerContext) -> None:
        """PD `validateRequest`: cluster id mismatch is a gRPC error, not a header error (docs/wire.md#pd-server-behaviour)."""
        expected = self._cluster.cluster_id
        if header.cluster_id != expected:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"mismatch cluster id, need {expected} but got {header.cluster_id}")

    def _member(self) -> pdpb_pb2.Member:
        url = f"http://{self._cluster.pd_address}"
        return pdpb_pb2.Member(name=PD_MEMBER_NAME, member_id=PD_MEMBER_ID, peer_urls=[url], client_urls=[url],
                               binary_version=self._cluster.store_version)

    @staticmethod
    def _pd_region(region: SimRegion) -> pdpb_pb2.Region:
        return pdpb_pb2.Region(region=region.to_pb(), leader=region.leader_peer())

    def _region_response(self, region: SimRegion | None) -> pdpb_pb2.GetRegionResponse:
        if region is None:
            return pdpb_pb2.GetRegionResponse(header=self._header())  # unknown: OK header, no region (docs/wire.md#pd-server-behaviour)
        return pdpb_pb2.GetRegionResponse(header=self._header(), region=region.to_pb(), leader=region.leader_peer())

    # ---- members ---------------------------------------------------------------------------

    def GetMembers(self, request, context):
        member = self._member()
        return pdpb_pb2.GetMembersResponse(header=self._header(), members=[member], leader=member,
                                           etcd_leader=member)

    def GetClusterInfo(self, request, context):
        return pdpb_pb2.GetClusterInfoResponse(header=self._header(), serviceModes=[pdpb_pb2.PD_SVC_MODE])

    # ---- TSO -------------------------------------------------------------------------------

    def Tso(self, request_iterator, context) -> Iterator[pdpb_pb2.TsoResponse]:
        for request in request_iterator:
            self._validate(request.header, context)
            if request.count == 0:
                context.abort(grpc.StatusCode.UNKNOWN, "[PD:tso:ErrGenerateTimestamp]tso count should be positive")
            ts = self._cluster.tso.next(request.count)  # the largest of `count` TSOs (docs/wire.md#pd-server-behaviour)
            yield pdpb_pb2.TsoResponse(header=self._header(), count=request.count,
                                       timestamp=pdpb_pb2.Timestamp(physical=physical_ms(ts), logical=logical(ts)))

    def GetMinTS(self, request, context):
        self._validate(request.header, context)
        ts = self._cluster.tso.next()
        return pdpb_pb2.GetMinTSResponse(header=self._header(),
                                         timestamp=pdpb_pb2.Timestamp(physical=physical_ms(ts), logical=logical(ts)))

    # ---- regions ---------------------------------------------------------------------------

    def GetRegion(self, request, context):
        self._validate(request.header, context)
        return self._region_response(self._cluster.regions.locate(request.region_key))

    def GetPrevRegion(self, request, context):
        self._validate(request.header, context)
        regions = self._cluster.regions
        return self._region_response(regions.prev(regions.locate(request.region_key)))

    def GetRegionByID(self, request, context):
        self._validate(request.header, context)
        return self._region_response(self._cluster.regions.get(request.region_id))

    def ScanRegions(self, request, context):
        """Both the legacy parallel arrays and the `regions` form are filled, as PD does (docs/wire.md#pd-server-behaviour)."""
        self._validate(request.header, context)
        found = self._cluster.regions.scan(request.start_key, request.end_key, request.limit)
        return pdpb_pb2.ScanRegionsResponse(
            header=self._header(),
            region_metas=[r.to_pb() for r in found],
            leaders=[r.leader_peer() for r in found],
            regions=[self._pd_region(r) for r in found])

    def BatchScanRegions(self, request, context):
        self._validate(request.header, context)
        ranges = list(request.ranges)
        for i, rng in enumerate(ranges):
            if rng.end_key and rng.start_key > rng.end_key:
                return pdpb_pb2.BatchScanRegionsResponse(header=self._header(
                    pdpb_pb2.UNKNOWN, f"invalid key range, start key > end key: {rng.start_key.hex()} > "
                                      f"{rng.end_key.hex()}"))
            if i and (not ranges[i - 1].end_key or ranges[i - 1].end_key > rng.start_key):
                return pdpb_pb2.BatchScanRegionsResponse(header=self._header(
                    pdpb_pb2.UNKNOWN, "invalid key range, ranges overlapped"))
        out: list[SimRegion] = []
        seen: set[int] = set()
        for rng in ranges:
            if request.limit > 0 and len(out) >= request.limit:
                break  # PD stops at the limit: later ranges are not scanned
            covered_to = rng.start_key
            for region in self._cluster.regions.scan(rng.start_key, rng.end_key):
                if request.limit > 0 and len(out) >= request.limit:
                    break
                if request.contain_all_key_range and region.start_key > covered_to:
                    return pdpb_pb2.BatchScanRegionsResponse(header=self._header(
                        pdpb_pb2.REGIONS_NOT_CONTAIN_ALL_KEY_RANGE,
                        f"regions not contain all key range, hole at {covered_to.hex()}"))
                covered_to = region.end_key
                if region.id not in seen:
                    seen.add(region.id)
                    out.append(region)
        return pdpb_pb2.BatchScanRegionsResponse(header=self._header(), regions=[self._pd_region(r) for r in out])

    # ---- stores ----------------------------------------------------------------------------

    def GetStore(self, request, context):
        self._validate(request.header, context)
        store = self._cluster.store_meta(request.store_id)
        if store is None:
            return pdpb_pb2.GetStoreResponse(header=self._header(
                pdpb_pb2.UNKNOWN, f"invalid store ID {request.store_id}, not found"))
        return pdpb_pb2.GetStoreResponse(header=self._header(), store=store)

    def GetAllStores(self, request, context):
        self._validate(request.header, context)
        stores = [s for s in self._cluster.store_metas()
                  if not (request.exclude_tombstone_stores and s.node_state == metapb_pb2.Removed)]
        return pdpb_pb2.GetAllStoresResponse(header=self._header(), stores=stores)

    # ---- GC --------------------------------------------------------------------------------

    def GetGCSafePoint(self, request, context):
        self._validate(request.header, context)
        return pdpb_pb2.GetGCSafePointResponse(header=self._header(),
                                               safe_point=self._cluster.gc_safe_points.gc_safe_point)

    def UpdateServiceGCSafePoint(self, request, context):
        """Classic PD semantics (docs/metadata.md#server-semantics): a refused value is not an error."""
        self._validate(request.header, context)
        service_id = request.service_id.decode("utf-8", errors="replace")
        current_min, ttl = self._cluster.gc_safe_points.update_service(service_id, request.TTL, request.safe_point)
        return pdpb_pb2.UpdateServiceGCSafePointResponse(
            header=self._header(), service_id=current_min.service_id.encode(), TTL=ttl,
            min_safe_point=current_min.safe_point)
