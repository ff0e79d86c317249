"""What the gRPC services of a simulated store or PD read of the cluster they serve.

SimCluster (cluster.py) builds the services and hands itself over as this view, so the services
depend on the shared state, not on the cluster that starts and stops them.
"""

from __future__ import annotations

from typing import Protocol

from tidelake.kvproto import metapb_pb2
from tidelake.sim.etcd_keyspace import EtcdKeyspace
from tidelake.sim.fault_state import FaultState
from tidelake.sim.gc_safepoints import GcSafePoints
from tidelake.sim.mvcc import MvccStore
from tidelake.sim.regions import RegionMap
from tidelake.sim.tso_oracle import TsoOracle


class ClusterView(Protocol):
    cluster_id: int
    store_version: str
    tso: TsoOracle
    mvcc: MvccStore
    regions: RegionMap
    faults: FaultState
    gc_safe_points: GcSafePoints
    etcd: EtcdKeyspace

    @property
    def pd_address(self) -> str: ...

    def store_meta(self, store_id: int) -> metapb_pb2.Store | None: ...

    def store_metas(self) -> list[metapb_pb2.Store]: ...
