"""An unstarted SimCluster (MVCC, regions, TSO only) and a SimTiDB over it: no ports, fast."""

from __future__ import annotations

import pytest

from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB


@pytest.fixture
def tidb() -> SimTiDB:
    return SimTiDB(SimCluster(n_stores=3, split_check_interval_s=0, gc_interval_s=0))
