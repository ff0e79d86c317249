"""Bootstrap end to end on the simulator, under a live writer.

Oracle: an upstream read at the same ts (the simulator's MVCC through SimTiDB.select_all), never
typed expectations. A replica at checkpoint c must equal upstream at c, right after bootstrap and
after the puller and merge carried it forward (no gap, no overlap at the handoff).
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from tests.bootstrap.bootstrap_harness import (
    COLUMNS,
    LiveWriter,
    fill,
    make_config,
    replica_rows,
    split_table,
    upstream_rows,
)
from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    config_doc,
    sim,
)
from tidelake.bootstrap import replica_write, snapshot_read
from tidelake.bootstrap.bootstrap_run import Bootstrap, BootstrapOptions
from tidelake.capture.changefeed.puller_runner import Shard
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.cli import main
from tidelake.config_writer import write_config
from tidelake.lake.checkpoint import read_checkpoint
from tidelake.lake.ddl_log import start_snapshot_ts
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaState
from tidelake.lake.table_starts import StartState, TableStarts
from tidelake.lake.watermarks import read_watermarks
from tidelake.merge.merge_run import run_merge
from tidelake.sim.tidb.session import SimTiDB
from tidelake.sim.workload import WorkloadRunner
from tidelake.wait import wait_until

pytestmark = pytest.mark.spark


@pytest.fixture
def shop(sim):
    tidb = SimTiDB(sim)
    tidb.create_database("shop")
    small = tidb.create_table("shop", "small", COLUMNS).table_id
    big = tidb.create_table("shop", "big", COLUMNS).table_id
    fill(tidb, "small", 300)
    fill(tidb, "big", 1500, seed=2)
    split_table(sim, big, [400, 800, 1200])  # 4 region ranges: read by Spark tasks
    return tidb, {"small": small, "big": big}


def checkpoints_match_upstream(spark, tidb, layout, tables):
    for table in tables:
        path = f"{layout.root}/shop/{table}"
        ts = read_checkpoint(path)
        assert ts is not None, f"{table} has no checkpoint"
        assert replica_rows(spark, path) == upstream_rows(tidb, table, ts), f"{table} differs from upstream at {ts}"


def test_bootstrap_then_replicate_equals_upstream_at_each_checkpoint(sim, shop, spark, tmp_path):
    tidb, ids = shop
    config = make_config(sim, tmp_path / "lake")
    layout = LakeLayout.from_config(config.lake)
    with LiveWriter(tidb, ["small", "big"], 2000) as writer:
        wait_until(lambda: writer.commits > 5, 30, "writer running")
        results = Bootstrap(config, BootstrapOptions(spark_threshold_regions=2), spark=spark).run()
        assert {r.name: r.how for r in results} == {"shop.small": "local", "shop.big": "spark"}
        ts = results[0].ts
        assert all(r.ts == ts for r in results) and start_snapshot_ts(layout) == ts
        checkpoints_match_upstream(spark, tidb, layout, ["small", "big"])

        with PullerThread(config):  # the puller's first run starts where bootstrap ended
            wait_until(lambda: read_watermarks(layout).ddl_resolved > ts, 30, "puller running")
            assert min(read_watermarks(layout).table_resolved[i] for i in ids.values()) >= ts
            writer_commits = writer.commits
            wait_until(lambda: writer.commits > writer_commits + 20, 30, "more writes")
    target = tidb.cluster.tso.next()
    with PullerThread(config):
        wait_until(lambda: min(read_watermarks(layout).table_resolved[i] for i in ids.values()) > target,
                 30, "watermarks past the last write")
    run_merge(spark, layout)
    checkpoints_match_upstream(spark, tidb, layout, ["small", "big"])
    assert all(read_checkpoint(f"{layout.root}/shop/{t}") > target for t in ids)


def test_crash_mid_bootstrap_leaves_no_checkpoint_and_a_rerun_is_correct(sim, shop, spark, tmp_path, monkeypatch):
    tidb, _ = shop
    config = make_config(sim, tmp_path / "lake")
    layout = LakeLayout.from_config(config.lake)
    real_scan = snapshot_read.scan_range
    ranges_read = []

    def crashing_scan(reader, key_range, ts, counted):
        ranges_read.append(key_range)
        if len(ranges_read) == 2:  # after some regions of the big table, locally read here
            raise RuntimeError("injected crash mid-bootstrap")
        yield from real_scan(reader, key_range, ts, counted)

    monkeypatch.setattr(snapshot_read, "scan_range", crashing_scan)
    with LiveWriter(tidb, ["small", "big"], 2000):
        with pytest.raises(RuntimeError, match="injected"):
            Bootstrap(config, BootstrapOptions(spark_threshold_regions=100, tables=("shop.big",)), spark=spark).run()
        assert read_checkpoint(f"{layout.root}/shop/big") is None
        monkeypatch.setattr(snapshot_read, "scan_range", real_scan)
        results = Bootstrap(config, BootstrapOptions(spark_threshold_regions=100), spark=spark).run()
    assert sorted(r.name for r in results if r.how == "local") == ["shop.big", "shop.small"]
    checkpoints_match_upstream(spark, tidb, layout, ["small", "big"])
    again = Bootstrap(config, BootstrapOptions(), spark=spark).run()
    assert {r.how for r in again} == {"skipped"}


def test_sigkill_between_creating_the_replica_and_its_rows_then_a_rerun_is_correct(sim, shop, spark, tmp_path):
    """A real SIGKILL of `tidelake bootstrap` (its Spark JVM and workers with it) after the replica
    table exists and before its rows commit: nothing claims a checkpoint, and the rerun is right."""
    import subprocess
    import sys

    import psutil

    from tidelake.config import load_config

    tidb, _ = shop
    doc = config_doc(sim, tmp_path / "lake")
    # Short leases: the killed run's lease is taken over seconds after, its replica refused till then.
    doc["lake"].update(lease_ttl="3s", lease_renew="1s", lease_wait="30s")
    toml = write_config(tmp_path / "cf.toml", doc)
    path = f"{tmp_path}/lake/shop/big"
    created = tmp_path / "lake" / "shop" / "big" / "_delta_log" / "00000000000000000000.json"
    with (tmp_path / "bootstrap.log").open("wb") as log:
        child = subprocess.Popen([sys.executable, "-m", "tidelake", "bootstrap", "--config", str(toml),
                                  "--table", "shop.big", "--spark-threshold-regions", "2"],
                                 stdout=log, stderr=subprocess.STDOUT)
        tree = psutil.Process(child.pid)
        wait_until(lambda: created.exists() or child.poll() is not None, 300, "the replica table created")
        for proc in [*tree.children(recursive=True), tree]:
            try:
                proc.kill()
            except psutil.NoSuchProcess:  # a short-lived helper of the tree ended since it was listed
                pass
        child.wait(30)
    assert child.returncode == -9, (tmp_path / "bootstrap.log").read_text()[-2000:]
    assert read_checkpoint(path) is None
    (result,) = Bootstrap(load_config(toml), BootstrapOptions(tables=("shop.big",)), spark=spark).run()
    assert result.path == path and read_checkpoint(path) == result.ts
    assert replica_rows(spark, path) == upstream_rows(tidb, "big", result.ts)


@pytest.mark.parametrize("shards", [1, 2])
def test_table_added_to_running_changefeed_joins_at_its_ts(sim, shop, spark, tmp_path, shards):
    tidb, ids = shop
    config = make_config(sim, tmp_path / "lake", rules=("shop.small",), shards=shards)
    layout = LakeLayout.from_config(config.lake)
    Bootstrap(config, BootstrapOptions(), spark=spark).run()

    def pullers(stack: ExitStack) -> list[PullerThread]:
        return [stack.enter_context(PullerThread(config, Shard(i, shards), join_lead_s=2.0, first_run_wait_s=30))
                for i in range(shards)]

    with ExitStack() as stack, LiveWriter(tidb, ["small", "big"], 2000) as writer:
        runs = pullers(stack)
        wait_until(lambda: read_watermarks(layout).ddl_resolved > 0 and writer.commits > 10, 30, "feed running")
        results = Bootstrap(config, BootstrapOptions(tables=("shop.big",), spark_threshold_regions=2), spark=spark).run()
        (joined,) = results
        assert joined.how == "spark"
        assert [s.state for s in TableStarts(layout).latest("cf1")] == [StartState.DONE]
        assert replica_rows(spark, f"{layout.root}/shop/big") == upstream_rows(tidb, "big", joined.ts)
        last = writer.commits
        wait_until(lambda: writer.commits > last + 20, 30, "writes after the join")
    assert [run.error for run in runs] == [None] * len(runs)
    target = tidb.cluster.tso.next()
    with ExitStack() as stack:  # a restart keeps the added table in the feed
        pullers(stack)
        wait_until(lambda: read_watermarks(layout).table_resolved.get(ids["big"], 0) > target, 30, "big resolved")
        assert read_watermarks(layout).table_resolved[ids["small"]] > 0
    run_merge(spark, layout)
    checkpoints_match_upstream(spark, tidb, layout, ["small", "big"])
    assert read_checkpoint(f"{layout.root}/shop/big") > target


def test_a_table_the_widened_filter_selects_is_bootstrapped_where_it_joined(sim, shop, spark, tmp_path):
    """[filter].rules widened between two runs of a sharded puller: the new table joins at J
    (filter_change), the merge waits for its bootstrap, and bootstrap reads it at J."""
    tidb, ids = shop
    lake = tmp_path / "lake"
    layout = LakeLayout(str(lake))
    narrow, wide = (make_config(sim, lake, rules=rules, shards=2) for rules in (("shop.small",), ("shop.*",)))
    Bootstrap(narrow, BootstrapOptions(), spark=spark).run()

    def pullers(stack: ExitStack, config) -> list[PullerThread]:
        return [stack.enter_context(PullerThread(config, Shard(i, 2), join_lead_s=2.0, first_run_wait_s=30,
                                                 table_starts_poll_s=0.5)) for i in range(2)]

    with LiveWriter(tidb, ["small", "big"], 2000) as writer:
        with ExitStack() as stack:
            runs = pullers(stack, narrow)
            wait_until(lambda: read_watermarks(layout).ddl_resolved > 0 and writer.commits > 10, 30, "feed running")
        with ExitStack() as stack:
            runs += pullers(stack, wide)
            starts = TableStarts(layout)
            wait_until(lambda: [s.state for s in starts.latest("cf1")] == [StartState.JOINED], 60, "big joined")
            (join,) = starts.latest("cf1")
            blocked = {t.table: t for t in run_merge(spark, layout).tables}["shop.big"]
            assert blocked.reason == f"no replica yet: bootstrap it from the snapshot at {join.start_ts}"
            results = {r.name: r for r in Bootstrap(wide, BootstrapOptions(), spark=spark).run()}
            assert results["shop.small"].how == "skipped" and results["shop.big"].ts == join.start_ts
            last = writer.commits
            wait_until(lambda: writer.commits > last + 20, 30, "writes after the bootstrap")
            target = tidb.cluster.tso.next()
            wait_until(lambda: read_watermarks(layout).table_resolved.get(ids["big"], 0) > target, 30, "big resolved")
    assert [run.error for run in runs] == [None] * len(runs)
    assert [s.state for s in TableStarts(layout).latest("cf1")] == [StartState.DONE]
    run_merge(spark, layout)
    checkpoints_match_upstream(spark, tidb, layout, ["small", "big"])
    assert read_checkpoint(f"{layout.root}/shop/big") > target


def test_a_table_the_narrowed_filter_drops_leaves_with_its_replica_as_of_its_last_fed_ts(sim, shop, spark, tmp_path):
    """[filter].rules narrowed between two runs: the puller lands a `filter` row at L (the table's
    watermark + 1), and the merge takes it as a DROP: the replica holds upstream as of L - 1."""
    tidb, ids = shop
    lake = tmp_path / "lake"
    layout = LakeLayout(str(lake))
    wide, narrow = (make_config(sim, lake, rules=rules) for rules in (("shop.*",), ("shop.small",)))
    Bootstrap(wide, BootstrapOptions(), spark=spark).run()
    with LiveWriter(tidb, ["small", "big"], 2000) as writer:
        for config in (wide, narrow):
            with PullerThread(config) as run:
                last = writer.commits
                wait_until(lambda: writer.commits > last + 10, 30, "writes while the puller runs")
                assert run.error is None
    left_at = read_watermarks(layout).table_resolved[ids["big"]] + 1
    run_merge(spark, layout)
    entry = ReplicaCatalog(layout).find("shop", "big")
    assert (entry.state, read_checkpoint(entry.path)) == (ReplicaState.DROPPED, left_at)
    assert entry.reason == f"left the changefeed at {left_at}: [filter].rules no longer select it"
    assert replica_rows(spark, entry.path) == upstream_rows(tidb, "big", left_at - 1)
    assert upstream_rows(tidb, "big", left_at - 1) != upstream_rows(tidb, "big", tidb.cluster.tso.next())
    checkpoints_match_upstream(spark, tidb, layout, ["small"])


def test_ts_below_the_gc_safepoint_is_refused_with_a_clear_error(sim, shop, tmp_path, capsys):
    old = sim.tso.next()
    sim.gc_safe_points.advance_gc_safe_point(sim.tso.next())
    path = write_config(tmp_path / "cf.toml", config_doc(sim, tmp_path / "lake"))
    assert main(["bootstrap", "--config", str(path), "--at-ts", str(old)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"start ts {old} is below the GC safepoint" in err[0]
    assert start_snapshot_ts(LakeLayout(str(tmp_path / "lake"))) is None


def test_every_column_type_bootstraps_the_same_through_local_and_spark_reads(sim, spark, tmp_path):
    """The workload's type_zoo holds one column of each TiDB type (datetime, time, bit, enum, set,
    json, ...): both read paths must write it exactly as upstream holds it."""
    tidb = SimTiDB(sim)
    WorkloadRunner(tidb, "smoke", seed=3, database="shop").run_ops(400)
    assert len(tidb.select_all("shop", "type_zoo")) > 10
    for how, threshold in (("local", 100), ("spark", 1)):
        config = make_config(sim, tmp_path / how)
        (result,) = Bootstrap(config, BootstrapOptions(tables=("shop.type_zoo",), spark_threshold_regions=threshold),
                              spark=spark).run()
        assert result.how == how
        assert replica_rows(spark, result.path) == upstream_rows(tidb, "type_zoo", result.ts), how


def test_a_rerun_after_a_crash_and_a_schema_change_starts_the_table_over(sim, shop, spark, tmp_path, monkeypatch):
    """The crashed attempt left an empty table with the old columns and no checkpoint; Delta
    will not change its schema in place (column mapping + CDF), so the rerun replaces it."""
    from delta.tables import DeltaTable

    tidb, _ = shop
    config = make_config(sim, tmp_path / "lake")
    only_small = BootstrapOptions(tables=("shop.small",))

    def crash(ts):
        raise RuntimeError("injected crash between CREATE and the rows")

    monkeypatch.setattr(replica_write, "writer_txn_options", crash)
    with pytest.raises(RuntimeError, match="injected"):
        Bootstrap(config, only_small, spark=spark).run()
    monkeypatch.undo()
    path = f"{config.lake.root}/shop/small"
    assert DeltaTable.isDeltaTable(spark, path) and read_checkpoint(path) is None
    tidb.add_column("shop", "small", ("extra", "int"))
    tidb.drop_column("shop", "small", "n")
    (result,) = Bootstrap(config, only_small, spark=spark).run()
    assert result.path == path
    assert replica_rows(spark, path) == upstream_rows(tidb, "small", result.ts)
