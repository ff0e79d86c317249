"""Each bench runs end to end at a tiny size, as `make bench` runs it (a child process, --json).

Numbers are not asserted (the machine is shared; timing belongs in bench/README.md); what is
asserted is that each bench measured what it claims: every path delivered every committed row,
lags were sampled, the backlog was caught up under each quota, the merge merged the changes.
"""

from __future__ import annotations

import json
import math
import os
import pstats
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_bench(script: str, tmp_path: Path, *args: str, timeout_s: float = 300) -> dict:
    out = tmp_path / f"{script}.json"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    # Its own process group: a bench that times out is killed with the servers it started.
    bench = subprocess.Popen([sys.executable, str(REPO / "bench" / script), *args, "--json", str(out)],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        stdout, stderr = bench.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(bench.pid, signal.SIGKILL)
        _, stderr = bench.communicate()
        pytest.fail(f"{script} did not finish within {timeout_s:.0f}s: {stderr[-3000:]}")
    assert bench.returncode == 0, stderr[-3000:]
    assert "| " in stdout  # the Markdown result table was printed
    report = json.loads(out.read_text())
    assert report["environment"]["cores"] >= 1 and report["environment"]["git"]
    return report["results"]


def test_bench_sim_counts_what_each_preset_wrote(tmp_path):
    results = run_bench("bench_sim.py", tmp_path, "--ops", "15", "--presets", "smoke,ddl-heavy",
                        "--big-rows", "300")
    by_preset = {r["preset"]: r for r in results["presets"]}
    assert set(by_preset) == {"smoke", "ddl-heavy"}
    assert by_preset["smoke"]["txns"] == 15 and by_preset["smoke"]["errors"] == 0
    assert by_preset["smoke"]["rows"] >= 15
    assert by_preset["ddl-heavy"]["ddls"] > 0
    assert results["mvcc_ceiling"]["rows"] >= by_preset["smoke"]["rows"]
    assert results["big_txn"]["rows"] == 300 and results["big_txn"]["total_s"] > 0


def test_bench_puller_every_path_delivers_every_committed_row(tmp_path):
    results = run_bench("bench_puller.py", tmp_path, "--preset", "narrow", "--rows", "1500", "--repeats", "1",
                        "--regions", "2", "--profile", str(tmp_path / "profile"))
    for stage in ("puller", "puller+lander"):  # the profiled runs saw the region workers handle every event
        stats = pstats.Stats(str(tmp_path / f"profile-{stage}.pstats")).stats
        assert any(name == "handle_rows" and calls > 0 for (_, _, name), (calls, *_) in stats.items()), stage
    assert results["regions"] == 4  # 2 tables x 2 regions
    assert results["rows"] == 1500  # each write is one committed row change
    # narrow: a 19-byte record key and a 64-byte value, plus the old value of the updates
    assert 19 + 64 < results["bytes_per_row"] < 19 + 64 + 64
    for run in results["runs"]:
        assert all(run[rate] > 0 and math.isfinite(run[rate]) for rate in ("rows_per_s", "mib_per_s", "cpu_s_per_gib"))
        assert math.isclose(run["mib_per_s"] * run["wall_s"], results["payload_mib"])
    assert {r["path"] for r in results["runs"]} == {
        "grpc ceiling", "state ceiling", "puller", "lander alone", "puller+lander"}
    for run in results["runs"]:
        if run["path"] == "grpc ceiling":
            assert run["rows"] == results["entry_rows"]  # every PREWRITE/COMMIT/INITIALIZED row
        else:
            assert run["rows"] == results["rows"]
    assert all(v > 0 and math.isfinite(v) for v in results["ratios"].values())


def test_bench_bootstrap_every_decoder_and_read_path_gets_every_row(tmp_path):
    results = run_bench("bench_bootstrap.py", tmp_path, "--rows", "3000", "--regions", "3", "--shape", "wide",
                        "--no-spark")
    assert results["regions"] == 3
    assert {r["path"]: r["rows"] for r in results["runs"]} == {
        "ceiling (KvScan, no decoding)": 3000, "decode only: reference": 3000, "decode only: RowDecoder": 3000,
        "decode only: mount": 3000, "local: read + decode": 3000}
    assert all(math.isfinite(v) and v > 0 for v in results["ratios"].values())


@pytest.mark.slow
def test_bench_lag_samples_lag_and_catches_up_under_each_quota(tmp_path):
    results = run_bench("bench_lag.py", tmp_path, "--duration", "4", "--warmup", "1", "--rate", "20",
                        "--backlog-rows", "3000", "--txn-rows", "1000", "--txns", "2", "--txn-hold", "1",
                        "--quotas", "1MiB,4MiB", "--merge-on-driver")
    lag = results["lag"]
    assert lag["samples"] > 0 and lag["txn_per_s"] > 0
    for p50, p95, worst in (lag["table_lag"], lag["durable_lag"]):
        assert 0 <= p50 <= p95 <= worst
    assert lag["rss_peak_mib"] > 0
    runs = results["backpressure"]["runs"]
    assert [(r["case"], r["quota"]) for r in runs] == [
        ("backlog", "1MiB"), ("txn", "1MiB"), ("backlog", "4MiB"), ("txn", "4MiB")]
    assert [r["rows"] for r in runs] == [3000, 2000] * 2
    for run in (r for r in runs if r["case"] == "txn"):
        assert [t["rows"] for t in run["transactions"]] == [1000, 1000] and 0 < run["merge_s"][0] <= run["merge_s"][2]
        assert [t["replica_commits"] for t in run["transactions"]] == [1, 1] and run["replica_commits_max"] == 1
        assert run["txn_row_bytes"] > 1000 * 400  # the default 400 B of padding a row, and its key
        assert 0 < run["land_s"][0] <= run["land_s"][2] and run["rss_peak_per_base_plus_quota"] > 0
    assert all(r["rows_per_s"] > 0 and r["rss_peak_mib"] >= r["rss_base_mib"] > 0 for r in runs)
    assert all(r["changelog_commits"] >= 1 for r in runs)
    assert set(results["backpressure"]["fits"]) == {"backlog", "txn"}


@pytest.mark.slow
@pytest.mark.spark
def test_bench_merge_merges_every_round_of_every_table(tmp_path):
    results = run_bench("bench_merge.py", tmp_path, "--rows", "300", "--txn-rows", "100", "--tables", "2",
                        "--small-rows", "20", "--samples", "1", timeout_s=900)
    first, second, third, small = results["rounds"]
    assert small["changes"] == 40 and 0 < small["rows_in"] <= 40 and results["tables_per_min"] > 0
    fixed = results["fixed_cost"]
    assert [len(fixed[k]) for k in ("insert_s", "update_s", "append_s")] == [1, 1, 1]
    assert results["fixed_cost_s"] > 0 and results["append_1row_s"] > 0
    assert results["merge_rows_per_s"] > 0 and results["append_rows_per_s"] > 0
    assert first["rows_in"] == first["rows_out"] == 600  # inserts only, 300 into each table
    for later in (second, third):
        assert 0 < later["rows_out"] == later["rows_in"] <= 600  # changes collapse to one per key
    assert third["checkpoint"] > second["checkpoint"] > first["checkpoint"]
    assert (second["threads"], third["threads"]) == (1, 2) and results["threads_speedup"] > 0
    assert 0 < results["append_ceiling"]["rows"] <= second["rows_out"] + third["rows_out"]


@pytest.mark.slow
@pytest.mark.spark
def test_bench_cluster_jars_runs_each_way_on_the_cluster_and_the_jar_folder_leaves_no_jars(tmp_path):
    results = run_bench("bench_cluster_jars.py", tmp_path, "--apps", "1", "--rows", "100", timeout_s=900)
    for way in ("packages", "jars_dir"):
        assert len(results[way]["app_s"]) == len(results[way]["work_bytes"]) == 1
    # --packages leaves every resolved jar behind; the folder on the classpath leaves none of them
    assert results["packages"]["work_bytes"][0] > results["jar_folder_bytes"] > 100 * results["jars_dir"]["work_bytes"][0]
    assert results["ceiling_local_s"] > 0 and set(results["vs_ceiling"]) == {"packages", "jars_dir"}


def test_bench_scale_resolves_every_table_and_reads_the_control_tables(tmp_path):
    results = run_bench("bench_scale.py", tmp_path, "--tables", "20", "--regions", "200", "--steady", "3",
                        "--shards", "1,2", "--light-rate", "20", "--hot-rate", "10", "--history-flushes", "12")
    assert results["upstream"]["physical_tables"] == 23  # tables 0 and 20 would be partitioned; 0 is, x4
    assert results["upstream"]["regions"] >= 180
    for run in results["runs"]:
        assert run["all_resolved_s"] is not None and run["caught_up_s"] >= run["all_resolved_s"]
        assert run["lag_samples"] > 0 and run["lag_p95_s"] >= run["lag_p50_s"]
        assert run["pd_calls"]["BatchScanRegions"] >= 1 and "ScanRegions" not in run["pd_calls"]
        assert run["control"]["watermark_rows"] >= 24  # a row per physical table per shard + DDL
        assert len(run["rss_peak_mib_per_shard"]) == run["shards"]
    assert results["frontier"]["regions_in_tables"] > 0
    assert [p["flushes"] for p in results["history"]["points"]][-1] == 12


@pytest.mark.slow
@pytest.mark.spark
def test_bench_compaction_reads_the_same_window_from_fewer_files(tmp_path):
    results = run_bench("bench_compaction.py", tmp_path, "--flushes", "30", "--rows-per-flush", "5", "--repeats", "1",
                        timeout_s=600)
    assert results["window_rows"] == 150 and results["rows_landed"] == 300
    assert results["files_before"] == 30 and results["files_after"] == 1 and results["files_removed"] == 60
    assert results["read_before_s"] > 0 and results["read_after_s"] > 0


def test_bench_iceberg_publish_publishes_every_table_at_each_cut(tmp_path):
    results = run_bench("bench_iceberg_publish.py", tmp_path, "--tables", "2", "--rows", "10", "--runs", "1")
    (run,) = results["2"]["runs"]  # the bench exits non-zero unless every table was published at both cuts
    assert run["first_s"] > 0 and run["next_s"] > 0 and run["ceiling_s"] > 0
    assert results["2"]["next_vs_ceiling"]["median"] == run["next_s"] / run["ceiling_s"]


@pytest.mark.skipif(not __import__("shutil").which("mariadb"), reason="needs Debian's mariadb-client (make sql-clients)")
def test_sql_corpus_runs_each_test_in_run_sh_order_and_classifies_refusals(tmp_path):
    """A folder shaped like TiCDC's integration tests, with our own scripts: run.sh decides the
    order and which script is the downstream's; refusals are counted by category."""
    folder = tmp_path / "tests"
    first = folder / "first" / "data"
    first.mkdir(parents=True)
    (first / "a_check.sql").write_text("USE orders_db;\nSELECT COUNT(*) FROM t;\n")
    (first / "b_prepare.sql").write_text("CREATE DATABASE orders_db;\nUSE orders_db;\n"
                                         "CREATE TABLE t (id INT PRIMARY KEY, v INT);\nINSERT INTO t VALUES (1, 1);\n")
    (first / "down.sql").write_text("CREATE DATABASE downstream_only;\n")
    (folder / "first" / "run.sh").write_text("run_sql_file $CUR/data/b_prepare.sql ${UP_TIDB_HOST} ${UP_TIDB_PORT}\n"
                                             "run_sql_file $CUR/data/a_check.sql ${UP_TIDB_HOST} ${UP_TIDB_PORT}\n"
                                             "run_sql_file $CUR/data/down.sql ${DOWN_TIDB_HOST} ${DOWN_TIDB_PORT}\n")
    second = folder / "second" / "data"
    second.mkdir(parents=True)
    (second / "x.sql").write_text("USE test;\nCREATE TABLE u (id INT PRIMARY KEY);\nADMIN CHECK TABLE u;\n"
                                  "INSERT INTO u VALUES (1);\nINSERT INTO u VALUES (1);\nSELEC 1;\n")
    results = run_bench("sql_corpus.py", tmp_path, str(folder), "--no-replicate", timeout_s=180)
    assert [r["script"] for r in results["scripts_detail"]] == ["first/data/b_prepare.sql", "first/data/a_check.sql",
                                                                 "second/data/x.sql"]
    assert results["skipped_downstream_only"] == ["first/data/down.sql"]
    assert (results["scripts"], results["fully_accepted"], results["refused"]) == (3, 2, 3)
    categories = {c["category"][:4]: (c["category"], c["count"]) for c in results["categories"]}
    assert categories["1235"] == ("1235 not supported: ADMIN statements", 1)
    assert categories["1062"] == ("1062 Duplicate entry ? for key ?", 1) and categories["1064"][1] == 1


@pytest.mark.slow
@pytest.mark.spark
def test_bench_freshness_times_every_change_at_every_stage(tmp_path):
    results = run_bench("bench_freshness.py", tmp_path, "--tables", "2", "--rate", "10", "--duration", "6",
                        "--flush-interval", "1s", "--syncpoint-interval", "2", timeout_s=600)
    (run,) = results["runs"]
    assert run["changes"] == 60 and run["load_errors"] == 0 and sum(run["ops"].values()) == 60
    assert run["drained_s"] is not None and run["passes"] >= 1 and run["out_of_order"] == 0
    for stage, figures in run["stages"].items():  # every change reached every stage, in order, after its commit
        assert figures["changes"] == 60 and figures["missing"] == 0, stage
        assert 0 < figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"], stage
    assert run["stages"]["landed"]["p50"] <= run["stages"]["merged"]["p50"] <= run["stages"]["syncpoint"]["p50"]
    assert results["by_tables"]["2"]["runs"] == 1


def test_bench_freshness_cost_times_the_metrics_over_every_change_merged(tmp_path):
    results = run_bench("bench_freshness_cost.py", tmp_path, "--tables", "2", "--passes", "2", "--commits", "2",
                        "--repeats", "1")
    (size,) = results["sizes"]
    assert size["tables"] == 2 and size["changes"] == 2 * 2 * 2  # every transaction on every table, each counted
    assert size["merged_pending"] == 0 and size["metrics_s_p50"] > 0 and size["merge_run_s_p50"] > 0
    assert size["versions_read"]["replicas"] >= 2 * 2  # each pass's merge committed to each replica


def test_bench_freshness_cost_incremental_times_the_trackers_calls_against_the_full_recompute(tmp_path):
    results = run_bench("bench_freshness_cost.py", tmp_path, "--tables", "2", "--passes", "2", "--commits", "2",
                        "--repeats", "2", "--incremental")
    (size,) = results["sizes"]
    assert results["incremental"] and size["changes"] == (2 + 2) * 2 * 2  # the figures equal (checked there)
    assert size["call_s_p50"] > 0 and size["full_s_p50"] > 0
    # a call after one pass read that pass's versions only: one flush, one resolve, one merge per replica
    assert size["versions_read"] == {"changelog": 1, "watermarks": 1, "replicas": 2, "syncpoints": 0}


def test_bench_log_reads_each_way_answers_as_its_ceiling_and_the_replica_as_built(tmp_path):
    results = run_bench("bench_log_reads.py", tmp_path, "--versions", "12", "--calls", "2", "--repeats", "1")
    (replica,) = results["replicas"]
    # A checkpoint in every ten versions, at the phase the replica's path sets (checkpoint_due).
    assert replica["newest_version"] == 11 and 0 <= replica["past_delta_checkpoint"] <= 9
    assert replica["checkpoint_version"]["answer"][1] == 11  # the newest append recorded the newest checkpoint
    assert replica["read_checkpoint"]["answer"] == replica["checkpoint_version"]["answer"][0]
    assert replica["refresh"]["answer"] == 11
    for way, fast, ceiling in (("checkpoint_version", "walk", "snapshots"), ("read_checkpoint", "walk", "table_open"),
                               ("refresh", "probe", "update_incremental"),
                               ("commit_read", "delta_log", "storage_handler")):
        assert replica[way][fast]["cpu_ms_p50"] > 0 and replica[way][ceiling]["cpu_ms_p50"] > 0


def test_bench_log_growth_on_s3_counts_requests_and_the_writers_commit_lists_no_whole_log(tmp_path):
    results = run_bench("bench_log_growth.py", tmp_path, "--files", "10", "--calls", "1", "--store", "s3")
    (log,) = results["logs"]
    assert results["store"] == "s3" and log["newest_version"] == 12
    assert log["probe"]["requests"]["list"] == 0 and log["probe"]["requests"]["head"] >= 1
    assert log["moved"]["requests"]["list"] >= 1  # the probe found the next commit: update_incremental listed
    assert log["own_commit"]["requests"]["put"] >= 2 and log["own_commit"]["requests"]["list_from_start"] == 0
    assert log["own_commit_default_hooks"]["requests"]["list_from_start"] >= 1  # delta-rs' cleanup at the commit
    assert log["read_checkpoint"]["requests"]["list"] == log["checkpoint_version"]["requests"]["list"] == 0
