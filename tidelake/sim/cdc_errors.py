"""The cdcpb.Error values TiKV's CDC endpoint sends (docs/wire.md#error, docs/wire.md#register, docs/wire.md#errors-raised-after-registration)."""

from __future__ import annotations

from collections.abc import Iterable

from tidelake.kvproto import cdcpb_pb2, errorpb_pb2, metapb_pb2

Error = cdcpb_pb2.Error

# TiKV's only server_is_busy reason on the CDC path (endpoint.rs on_register).
TOO_MANY_PENDING_SCANS = "too many pending incremental scans"
# Compatibility.required_version for a kv_api the store cannot serve (endpoint.rs on_register).
KV_API_REQUIRED_VERSION = "6.2.0"


def cluster_id_mismatch(current: int, request: int) -> Error:
    return Error(cluster_id_mismatch=cdcpb_pb2.ClusterIDMismatch(current=current, request=request))


def compatibility() -> Error:
    return Error(compatibility=cdcpb_pb2.Compatibility(required_version=KV_API_REQUIRED_VERSION))


def server_is_busy() -> Error:
    return Error(server_is_busy=errorpb_pb2.ServerIsBusy(reason=TOO_MANY_PENDING_SCANS))


def region_not_found(region_id: int) -> Error:
    return Error(region_not_found=errorpb_pb2.RegionNotFound(region_id=region_id))


def duplicate_request(region_id: int) -> Error:
    return Error(duplicate_request=cdcpb_pb2.DuplicateRequest(region_id=region_id))


def not_leader(region_id: int, leader: metapb_pb2.Peer | None) -> Error:
    err = errorpb_pb2.NotLeader(region_id=region_id)
    if leader is not None:
        err.leader.CopyFrom(leader)
    return Error(not_leader=err)


def epoch_not_match(current_regions: Iterable[metapb_pb2.Region]) -> Error:
    return Error(epoch_not_match=errorpb_pb2.EpochNotMatch(current_regions=list(current_regions)))


def congested(region_id: int) -> Error:
    return Error(congested=cdcpb_pb2.Congested(region_id=region_id))
