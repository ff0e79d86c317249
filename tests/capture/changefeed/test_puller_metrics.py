"""The puller's Prometheus endpoint: scraped over HTTP while a puller runs on the simulator, the
values compared with what the test did upstream and what landed in the lake."""

from __future__ import annotations

import random
import socket
import time
import urllib.request
from pathlib import Path

from deltalake import DeltaTable
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    config_doc,
    make_config,
    oracle,
    sim,
    start_ts,
    wait_resolved,
)
from tests.capture.tidb_writes import TiDBWrites
from tidelake import tso
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.codec.keys import record_key, table_record_span_encoded, to_region_key
from tidelake.config_writer import config_from_document, write_config
from tidelake.lake.layout import LakeLayout
from tidelake.wait import wait_until

SHOP = 2


def scrape(run: PullerThread) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the runner's endpoint, keyed by (name, sorted labels without changefeed)."""
    endpoint = wait_until(lambda: run.runner.metrics_endpoint, 20, "the metrics endpoint", check=run.check)
    with urllib.request.urlopen(f"http://127.0.0.1:{endpoint.port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.pop("changefeed") == "cf1"
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def scrape_checkpoint_past(run: PullerThread, ts: int):
    """A scrape once the GC checkpoint (min durable watermark) is at or past `ts`, else None."""
    samples = scrape(run)
    return samples if value(samples, "tidelake_puller_checkpoint_time_seconds") >= tso.physical_ms(ts) / 1000 else None


def scrape_spilled(run: PullerThread, spilled: bool):
    """A scrape once prewrites wait in the spill file (spilled) or none do (not spilled), else None."""
    samples = scrape(run)
    return samples if bool(value(samples, "tidelake_puller_prewrite_spilled_rows")) == spilled else None


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def landed(lake: Path, table_id: int) -> list[dict]:
    t = DeltaTable(LakeLayout(str(lake)).changelog).to_pyarrow_table(
        columns=["table_id", "key", "value", "old_value"]).to_pylist()
    return [r for r in t if r["table_id"] == table_id]


def table_region_ids(sim, table_id: int) -> list[int]:
    return [r.id for r in sim.regions.scan(*table_record_span_encoded(table_id))]


def test_endpoint_reports_what_the_puller_pulled_landed_and_met(sim, tmp_path):
    rng = random.Random(16)
    lake = tmp_path / "lake"
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    for table_id in (110, 111):
        tidb.create_table(SHOP, table_id, f"t{table_id}")
    sim.split_region(sim.split_table(111).id, to_region_key(record_key(111, 25)))  # two regions
    config = make_config(sim, lake)
    with PullerThread(config, metrics_port=0, gc_advance_interval_s=0.2) as run:
        start = start_ts(lake, run)
        last = 0
        for table_id, n in ((110, 7), (111, 4)):
            for _ in range(n):
                last = tidb.rows(table_id, {h: rng.randbytes(rng.randrange(1, 40)) for h in rng.sample(range(50), 3)})
        last = max(last, tidb.rows(110, {3: None}))  # a delete too
        wait_resolved(lake, {110: last, 111: last}, 0, run)
        # every flush that moved the watermarks also counted its rows: all of them are in by now
        samples = wait_until(lambda: scrape_checkpoint_past(run, last), 20, "the checkpoint past the last write")
        scraped_at = time.time()

        for table_id in (110, 111):
            rows = landed(lake, table_id)
            assert {(r["key"], r["value"]) for r in rows} == {(k, v) for _, k, _, _, v in oracle(sim, table_id, start)}
            assert value(samples, "tidelake_lander_table_rows_total", table_id=str(table_id)) == len(rows)
            assert value(samples, "tidelake_lander_table_bytes_total", table_id=str(table_id)) == sum(
                len(r["key"]) + len(r["value"]) + len(r["old_value"]) for r in rows)
            # resolved at or past the last write: its lag is at most the time since that write
            assert value(samples, "tidelake_puller_table_resolved_time_seconds",
                         table_id=str(table_id)) >= tso.physical_ms(last) / 1000
            assert 0 <= value(samples, "tidelake_puller_table_resolved_lag_seconds",
                              table_id=str(table_id)) <= scraped_at - tso.physical_ms(last) / 1000
            regions = table_region_ids(sim, table_id)
            assert value(samples, "tidelake_puller_regions", table_id=str(table_id), state="replicating") == len(regions)
            assert value(samples, "tidelake_puller_regions", table_id=str(table_id), state="initializing") == 0
        assert len(table_region_ids(sim, 111)) == 2
        every_row = len(landed(lake, 110)) + len(landed(lake, 111))
        assert value(samples, "tidelake_lander_rows_total") == every_row
        assert value(samples, "tidelake_puller_rows_total") == every_row
        assert value(samples, "tidelake_lander_flush_seconds_count") == value(samples, "tidelake_lander_flushes_total") > 0
        assert value(samples, "tidelake_puller_memory_quota_bytes") == config.puller.memory_quota_bytes
        # every transaction committed: no prewrite waits, in memory or spilled
        assert value(samples, "tidelake_puller_prewrite_memory_bytes") == 0
        assert value(samples, "tidelake_puller_prewrite_spilled_rows") == 0
        assert value(samples, "tidelake_puller_gc_ttl_seconds") == config.upstream.gc_ttl_s
        held = next(s for s in sim.gc_safe_points.services() if s.service_id == "tidelake-cf1")
        assert value(samples, "tidelake_puller_checkpoint_time_seconds") == tso.physical_ms(held.safe_point + 1) / 1000
        assert value(samples, "tidelake_upstream_gc_safepoint_time_seconds") <= tso.physical_ms(held.safe_point) / 1000
        assert not [k for k in samples if k[0] == "tidelake_puller_region_errors_total"]

        # a congested region and a broken stream are counted by kind, the new stream by store
        region = sim.regions.get(table_region_ids(sim, 110)[0])
        store = region.leader_store_id
        sim.faults.congest(region.id)
        sim.faults.reset_streams(store)
        on_store = sum(1 for t in (110, 111) for r in sim.regions.scan(*table_record_span_encoded(t))
                       if r.leader_store_id == store)
        after = tidb.rows(110, {60: b"after"})
        wait_resolved(lake, {110: after, 111: after}, 0, run)
        samples = scrape(run)
        assert value(samples, "tidelake_puller_region_errors_total", kind="congested") == 1
        assert value(samples, "tidelake_puller_region_errors_total", kind="stream_broken") >= on_store
        assert value(samples, "tidelake_puller_stream_reconnects_total", store_id=str(store)) >= 1
    # the runner's registry is its own: nothing went to the process's default registry
    assert REGISTRY.get_sample_value("tidelake_lander_table_rows_total", {"changefeed": "cf1", "table_id": "110"}) is None


def test_a_metrics_port_in_use_or_out_of_range_is_one_line_and_exit_2(sim, tmp_path, capsys):
    path = write_config(tmp_path / "cf.toml", config_doc(sim, tmp_path / "lake"))
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["pull", "--config", str(path), "--metrics-port", str(port), "--max-run-seconds", "5"]) == 2
    err = capsys.readouterr().err
    assert f"metrics endpoint on 0.0.0.0:{port}" in err and "Traceback" not in err
    assert main(["pull", "--config", str(path), "--metrics-port", "70000"]) == 2
    assert "--metrics-port must be a TCP port" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text().replace("[puller]\n", "[puller]\nmetrics_port = 0\n"))
    assert main(["pull", "--config", str(bad)]) == 2
    assert "metrics_port" in capsys.readouterr().err


def test_waiting_prewrites_beyond_their_share_of_the_memory_quota_spill_and_land_in_full(sim, tmp_path):
    """A 64 KiB memory quota gives waiting prewrites 1 KiB of memory: most of a 40-row transaction
    waits in the spill file until its commit, and every row lands as the upstream committed it."""
    lake = tmp_path / "lake"
    tidb = TiDBWrites(sim)
    tidb.create_db(SHOP, "shop")
    tidb.create_table(SHOP, 110, "t110")
    doc = config_doc(sim, lake)
    doc["puller"]["memory_quota"] = "64KiB"
    config = config_from_document(doc, "test.toml")
    with PullerThread(config, metrics_port=0) as run:
        start = start_ts(lake, run)
        keys = [record_key(110, h) for h in range(40)]
        txn_start = sim.tso.next()
        sim.mvcc.prewrite([("put", k, bytes([i]) * 100) for i, k in enumerate(keys)], keys[0], txn_start, 60_000)
        samples = wait_until(lambda: scrape_spilled(run, True), 20, "prewrites in the spill file")
        held = value(samples, "tidelake_puller_prewrite_memory_bytes")
        assert 0 < held <= 1024
        assert 0 < value(samples, "tidelake_puller_prewrite_spilled_rows") < 40
        commit_ts = sim.tso.next()
        sim.mvcc.commit(keys, txn_start, commit_ts)
        wait_resolved(lake, {110: commit_ts}, 0, run)
        rows = landed(lake, 110)
        assert {(r["key"], r["value"]) for r in rows} == {(k, v) for _, k, _, _, v in oracle(sim, 110, start)}
        assert len(rows) == 40
        samples = wait_until(lambda: scrape_spilled(run, False), 20, "the spill file drained")
        assert value(samples, "tidelake_puller_prewrite_memory_bytes") == 0
