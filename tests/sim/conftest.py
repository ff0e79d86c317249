"""`sim_cluster`: a small simulated cluster (PD + 3 stores) on loopback, shared by the sim tests.

Background workers are off (split checker, GC) so tests drive them explicitly; the leader failover
delay is short so store-stop tests stay fast.
"""

from __future__ import annotations

import pytest

from tidelake.sim.cluster import SimCluster


@pytest.fixture
def sim_cluster():
    cluster = SimCluster(n_stores=3, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8, cdc_options={"min_ts_interval_s": 0.2})
    with cluster:
        yield cluster
