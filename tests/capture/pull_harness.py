"""Shared pieces of the puller-runner tests: a small cluster, a changefeed config, the lake read
back, and the oracle taken from the simulator's own MVCC write records."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.codec.keys import table_record_span
from tidelake.config import ChangefeedConfig
from tidelake.config_writer import changefeed_document, config_from_document
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import read_watermarks
from tidelake.sim.cluster import SimCluster
from tidelake.wait import wait_until


def small_sim() -> SimCluster:
    """Two stores, no background splits or GC, resolved ts every 0.2 s: quick to pull from."""
    return SimCluster(n_stores=2, leader_failover_delay_s=0.2, split_check_interval_s=0, gc_interval_s=0,
                      server_workers=8, cdc_options={"min_ts_interval_s": 0.2})


@pytest.fixture
def sim():
    with small_sim() as cluster:
        yield cluster


def config_doc(sim: SimCluster, lake: Path, rules=("shop.*",), flush="200ms", **changefeed) -> dict:
    doc = changefeed_document("cf1", [sim.pd_address], lake, rules=rules, gc_ttl="10m",
                              puller={"flush_interval": flush})
    doc["changefeed"].update(changefeed)
    return doc


def make_config(sim: SimCluster, lake: Path, **kw) -> ChangefeedConfig:
    return config_from_document(config_doc(sim, lake, **kw), "test.toml")


def watermarks(lake: Path):
    return read_watermarks(LakeLayout(str(lake)))


def wait_resolved(lake: Path, tables: dict[int, int], ddl_ts: int = 0, runner: PullerThread | None = None):
    """Until every table's watermark and the DDL watermark reach the given ts."""
    def check():
        if runner is not None and runner.error is not None:
            raise runner.error

    def reached():
        w = watermarks(lake)
        return w.ddl_resolved >= ddl_ts and all(w.table_resolved.get(t, 0) >= ts for t, ts in tables.items())

    return wait_until(reached, 40, f"watermarks {tables} / ddl {ddl_ts}", check=check)


def changelog(lake: Path) -> list[tuple[int, bytes, int, str, bytes]]:
    """(table id, key, commit ts, op, value) of every landed row, duplicates kept."""
    path = LakeLayout(str(lake)).changelog
    if not DeltaTable.is_deltatable(path):
        return []
    t = DeltaTable(path).to_pyarrow_table(columns=["table_id", "key", "commit_ts", "op", "value"]).to_pylist()
    return [(r["table_id"], r["key"], r["commit_ts"], r["op"], r["value"]) for r in t]


def oracle(sim: SimCluster, table_id: int, after_ts: int) -> set[tuple[int, bytes, int, str, bytes]]:
    """Every committed put/delete of the table with commit ts > after_ts, from the MVCC write records."""
    start, end = table_record_span(table_id)
    return {(table_id, e.key, e.commit_ts, e.op, e.value)
            for e in sim.mvcc.snapshot_delta(start, end, after_ts) if e.commit_ts > 0}


def ddl_rows(lake: Path) -> list[dict]:
    return DeltaTable(LakeLayout(str(lake)).ddl).to_pyarrow_table().to_pylist()


def start_ts(lake: Path, runner: PullerThread) -> int:
    """The start ts the runner chose, as recorded by its schema snapshot rows (not a watermark,
    which a second flush may already have moved past it)."""
    from tidelake.lake.layout import DdlSource

    wait_resolved(lake, {}, 1, runner)
    return next(r["commit_ts"] for r in ddl_rows(lake) if r["source"] == DdlSource.SNAPSHOT)
