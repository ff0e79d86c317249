"""PD members in front of one simulated PD, for leader-failover and TLS tests."""

from __future__ import annotations

import grpc

from tidelake.kvproto import pdpb_pb2
from tidelake.sim.cluster import SimCluster
from tidelake.sim.pd_service import PdService


class PdMembers:
    """PD members (one per URL) in front of one simulated PD; only the current leader serves
    requests, and RPCs named in `unimplemented` answer UNIMPLEMENTED like an older PD."""

    def __init__(self, sim: SimCluster) -> None:
        self.inner = PdService(sim)
        self.cluster_id = sim.cluster_id
        self.urls: list[str] = []
        self.leader = 0
        self.unimplemented: set[str] = set()

    def members(self) -> pdpb_pb2.GetMembersResponse:
        members = [pdpb_pb2.Member(name=f"pd{i}", client_urls=[f"http://{u}"]) for i, u in enumerate(self.urls)]
        return pdpb_pb2.GetMembersResponse(header=pdpb_pb2.ResponseHeader(cluster_id=self.cluster_id),
                                           members=members, leader=members[self.leader])

    def servicer(self, index: int):
        owner = self

        class Member:
            def __getattr__(self, name):
                method = getattr(owner.inner, name)

                def call(request, context):
                    if name == "GetMembers":
                        return owner.members()
                    if name in owner.unimplemented:
                        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"unknown method {name}")
                    if owner.leader != index:
                        context.abort(grpc.StatusCode.UNAVAILABLE, "not leader")
                    return method(request, context)

                return call

        return Member()
