"""A simulated cluster (PD + 3 stores over loopback gRPC) and clients pointed at it.

Background split checking and GC are off so each test drives regions and GC itself.
"""

from __future__ import annotations

import pytest

from tidelake.sim.cluster import SimCluster
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient


@pytest.fixture
def sim():
    cluster = SimCluster(n_stores=3, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                         server_workers=8)
    with cluster:
        yield cluster


@pytest.fixture
def pd(sim):
    client = PDClient([f"http://{sim.pd_address}"], retry_timeout_s=10)
    yield client
    client.close()


@pytest.fixture
def reader(pd):
    with SnapshotReader(pd, batch_size=7, backoff_budget_s=20, lock_wait_budget_s=20) as snapshot_reader:
        yield snapshot_reader

