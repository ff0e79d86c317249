"""One changefeed over 100 tables and ~1,000 regions: the paths bench/bench_scale.py measures at
1,000 tables and 10,000 regions, with their outcomes asserted.

Every table gets a resolved ts and lands exactly what the simulator's MVCC committed after the
start; PD is asked for regions in a few batched lookups, not once per table or region; the
puller reads each store over one stream whatever the region count; the watermarks table holds
one row per physical table and one for DDL.
"""

from __future__ import annotations

import threading

from deltalake import DeltaTable

from tests.capture.pull_harness import changelog, make_config, oracle, wait_resolved
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.codec.keys import record_key
from tidelake.codec.memcomparable_bytes import encode_bytes
from tidelake.lake.layout import LakeLayout
from tidelake.sim.cluster import SimCluster
from tidelake.sim.tidb.session import SimTiDB

TABLES = 100
REGIONS_PER_PHYSICAL_TABLE = 9
SCAN_LIMIT = 1024  # FeedOptions.scan_limit: regions per PD lookup


def _build(sim: SimCluster) -> tuple[SimTiDB, list[int]]:
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    for i in range(TABLES):
        partition = {"type": "hash", "column": "id", "count": 4} if i % 20 == 0 else None
        tidb.create_table("shop", f"t{i:03d}", [("id", "bigint"), ("v", "varchar(16)")], primary_key=["id"],
                          partition=partition)
    physical = sorted(pid for _, _, info in tidb.tables() for pid in info.physical_ids())
    for pid in physical:
        for k in range(1, REGIONS_PER_PHYSICAL_TABLE):
            key = encode_bytes(record_key(pid, k * 1000))
            sim.regions.split(sim.regions.locate(key).id, key)
    return tidb, physical


def test_a_hundred_tables_over_a_thousand_regions(tmp_path):
    with SimCluster(n_stores=3, split_check_interval_s=0, gc_interval_s=0, server_workers=16,
                    cdc_options={"min_ts_interval_s": 0.2}) as sim:
        tidb, physical = _build(sim)
        regions = len(sim.regions.all())
        assert regions >= 1000
        start = sim.tso.next()
        for i in range(TABLES):  # a backlog after the start: every table, every partition of some
            with tidb.txn() as txn:
                for handle in (1, 2, 3, 1001, 5002):
                    txn.insert("shop", f"t{i:03d}", {"id": handle, "v": f"r{i}"})
        written = sim.tso.next()
        before = sim.pd_calls.snapshot()
        lake = tmp_path / "lake"
        with PullerThread(make_config(sim, lake, start_ts=start), progress_interval_s=3600) as puller:
            wait_resolved(lake, {pid: written for pid in physical}, written, puller)
            receivers = [t.name for t in threading.enumerate() if t.name.startswith("cdc-recv-s")]
        calls = {k: v - before.get(k, 0) for k, v in sim.pd_calls.snapshot().items()}
        landed = {row for row in changelog(lake) if row[0] in physical}
        expected = set().union(*(oracle(sim, pid, start) for pid in physical))

    assert landed == expected and len(expected) == 5 * TABLES
    # Region lookups batched: a handful of BatchScanRegions for all tables, none per table or region.
    assert calls.get("ScanRegions", 0) == 0 and calls.get("GetRegion", 0) <= 2
    assert 1 <= calls["BatchScanRegions"] <= regions // SCAN_LIMIT + 3
    # One multiplexed stream, hence one receiving thread, per store.
    assert sorted(receivers) == [f"cdc-recv-s{store}" for store in (1, 2, 3)]
    watermark_rows = DeltaTable(LakeLayout(str(lake)).watermarks).to_pyarrow_table().to_pylist()
    assert sorted(r["table_id"] for r in watermark_rows if r["kind"] == "table") == physical
    assert [r["kind"] for r in watermark_rows].count("ddl") == 1
