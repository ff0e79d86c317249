"""Merge throughput: changelog rows merged per second into a replica, against a plain Delta append.

The lake is made the production way: a SimCluster + SimTiDB table `bench.orders`, the real
PullerRunner (in this process) landing the changes; row values are the codec's row-v2 encoding of
seeded rows (encode_row, byte for byte what TiDB writes), committed with Percolator 2PC in
--txn-rows row transactions straight into MVCC (SimTiDB's statement layer would make the setup,
not the merge, the slow part). Two rounds:
  round 1  --rows inserts, then `run_merge` (creates the replica; Spark warm-up, reported only);
  round 2  --rows changes: --update-ratio updates of round-1 keys, the rest inserts, then
           `run_merge` again: the measured window(s).
With --tables N > 1 every table gets the same writes, and a round 3 like round 2 is merged with
--threads tables at once (run_merge's threads) where round 2 merges them one after another; then
a "small" round gives every table --small-rows changes and merges them all in one run with
--threads: tables_per_min. With --small-tables K the small round is over K more tables instead
(created at the start, given --small-rows inserts merged in round 1, then --small-rows changes each):
tables_per_min of K small tables measured in the same run as a --rows window of the first table.
Ceiling, same Spark session: the rows rounds 2 (and 3) left in the first replica (decoded, replica columns,
cached and counted first) appended to a new Delta table with `mode("append")`: the cost of writing
those rows without reading the changelog, decoding, collapsing or MERGE.
Fixed cost: --samples warm 1-change windows of the first table, once a new key (insert) and once
an existing key (update), each a run_merge of that table alone; against --samples plain Delta
appends of one row in the same session (append_1row_s). Medians.
--compare-deletion-vectors (needs --tables 2 or more): after round 1 the first table gets deletion vectors
(delta.enableDeletionVectors, as replicas had before issue #16), the others keep the default (off), and
round 2 merges the tables one at a time, so the same changes are timed with and without them in one run.
--compare-append (needs --tables 2 or more): round 2 merges the tables one at a time, the first with the
INSERT of new keys (tidelake.merge.writers.spark_writer), the others
with every window one MERGE, as before: both ways over the same changes in one run.

--compare-driver (needs --tables 2 or more): round 2 merges the tables one at a time, the first with
windows of at most DRIVER_WINDOW_MAX_ROWS changes on the driver (tidelake.merge.writers.delta_rs_writer), the
others through Spark: both over the same changes in one run.

--compare-rewrite (needs --tables 2 or more): at the end, the second table gets column mapping (as
replicas had before issue #16) and every table then gets a RENAME COLUMN upstream; each is merged
alone: the first is rewritten (one overwrite of every row, so every Delta reader keeps reading it),
the second renames in place (metadata only). JSON `rewrite`: seconds of each, the rows rewritten,
and the rewrite's rows/s against the append ceiling's.

--soft-deletes: every bench replica keeps its deleted rows flagged (`[history] soft_deletes`,
docs/history.md), so the same rounds time the soft-delete MERGE; with --compare-driver, on the
driver and through Spark.

--history: every bench replica gets an SCD2 history table (`[history] scd2`, docs/history.md),
written before each window, so the same rounds time a window with its history step; with
--compare-driver, both on the driver (delta-rs) and both through Spark.

--column-mapping: after round 1 every bench replica gets column mapping (name mode, as a replica
whose column name Parquet cannot hold is created, docs/operations.md "Who can read a replica"),
so the rounds after it time windows on column-mapped replicas; with --compare-driver, the window
rewrite on the driver (tidelake.merge.writers.file_rewrite) and through Spark.

--remote URL (a running `tidelake spark-server`) or --remote start (one started for the bench on
local[2], stopped after) repeats the whole measurement as a Spark Connect client after the local
one, in the same run on a new lake: JSON `connect` holds its results, `connect_vs_local` the
ratios, and `session_start_s` of each what a merge task pays before its first MERGE.

--marks FILE writes each run_merge's tables and wall-clock span (JSON lines), to cut the Spark event
log of the same run (--spark-conf spark.eventLog.enabled=true --spark-conf spark.eventLog.compress=false:
Spark 4 compresses it otherwise) into its merge runs with bench/spark_jobs.py.

    .venv/bin/python bench/bench_merge.py [--rows 50000] [--txn-rows 1000] [--update-ratio 0.3] [--seed 0]
        [--tables 1] [--threads 2] [--small-rows 100] [--small-tables K] [--samples 5] [--compare-deletion-vectors | --compare-append | --compare-driver]
        [--compare-rewrite] [--soft-deletes] [--history] [--column-mapping]
        [--spark-conf spark.databricks.delta.snapshotPartitions=2 ...]
        [--remote sc://127.0.0.1:15002 | --remote start] [--marks FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from contextlib import contextmanager, nullcontext
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Timer, markdown_table, print_environment, write_json  # noqa: E402
from tidelake.capture.changefeed.puller_runner import PullerRunner, RunOptions  # noqa: E402
from tidelake.codec.keys import record_key  # noqa: E402
from tidelake.codec.row import encode_row  # noqa: E402
from tidelake.config import HistoryConfig, parse_config  # noqa: E402
from tidelake.lake.history_table import history_path  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.replica_catalog import ReplicaCatalog  # noqa: E402
from tidelake.lake.watermarks import read_watermarks  # noqa: E402
from tidelake.merge.replica_schema import COMMIT_TS_COLUMN  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402

DATABASE, TABLE = "bench", "orders"
COLUMNS = [("id", "bigint", "pk"), ("customer", "int"), ("amount", "decimal(12,2)"), ("status", "varchar(16)"),
           ("note", "varchar(64)")]


class _Upstream:
    """The table and the seeded writes into it."""

    def __init__(self, cluster: SimCluster, tidb: SimTiDB, name: str, seed: int) -> None:
        self.cluster = cluster
        self.name = name
        self.rng = random.Random(seed)
        tidb.create_table(DATABASE, name, COLUMNS)
        _, self.info = tidb.resolve_table(DATABASE, name)
        self.ids: list[int] = []

    def write_one(self, update: bool) -> int:
        """One change in its own txn: a new key, or the first key again."""
        if not update:
            self.ids.append(len(self.ids) + 1)
        handle = 1 if update else len(self.ids)
        row = {"id": handle, "customer": self.rng.randrange(100_000), "amount": Decimal(1),
               "status": "paid", "note": f"order {handle}"}
        key = record_key(self.info.id, handle)
        tso, mvcc = self.cluster.tso, self.cluster.mvcc
        start_ts = tso.next()
        mvcc.prewrite([("put", key, encode_row(self.info, row))], key, start_ts, 10_000)
        mvcc.commit([key], start_ts, tso.next())
        return tso.next()

    def write(self, rows: int, txn_rows: int, update_ratio: float) -> int:
        tso, mvcc = self.cluster.tso, self.cluster.mvcc
        for first in range(0, rows, txn_rows):
            batch: dict[bytes, bytes] = {}
            for _ in range(min(txn_rows, rows - first)):
                handle = self.rng.choice(self.ids) if self.ids and self.rng.random() < update_ratio else 0
                if not handle or record_key(self.info.id, handle) in batch:  # one change per key and txn
                    handle = len(self.ids) + 1
                    self.ids.append(handle)
                row = {"id": handle, "customer": self.rng.randrange(100_000),
                       "amount": Decimal(self.rng.randrange(10**7)).scaleb(-2),
                       "status": self.rng.choice(("new", "paid", "shipped")), "note": f"order {handle}"}
                batch[record_key(self.info.id, handle)] = encode_row(self.info, row)
            keys = list(batch)
            start_ts = tso.next()
            mvcc.prewrite([("put", k, v) for k, v in batch.items()], keys[0], start_ts, 10_000)
            mvcc.commit(keys, start_ts, tso.next())
        return tso.next()


def _write_small(layout: LakeLayout, upstreams: list[_Upstream], rows: int, txn_rows: int, update_ratio: float,
                 errors: list) -> None:
    lasts = [(u.info.id, u.write(rows, txn_rows, update_ratio)) for u in upstreams]
    for table_id, last in lasts:
        _wait_durable(layout, table_id, last, errors)


def _wait_durable(layout: LakeLayout, table_id: int | None, ts: int, runner_error: list) -> None:
    deadline = time.monotonic() + 600
    while True:
        if runner_error:
            raise runner_error[0]
        marks = read_watermarks(layout)
        if (table_id is None or marks.table_resolved.get(table_id, 0) >= ts) and marks.ddl_resolved >= ts:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"watermarks stuck below {ts}: {marks}")
        time.sleep(0.2)


def _merge(spark, layout: LakeLayout, tables: list[str], threads: int, only: list[str] | None = None,
           history: HistoryConfig | None = None) -> dict:
    """One run over every bench table (or `only`); rows summed over them, the checkpoint of the first."""
    from tidelake.merge.merge_run import run_merge

    started = time.time()
    with Timer() as timer:
        report = run_merge(spark, layout, tables=only, write_log=False, threads=threads, history_config=history)
    if MARKS is not None:  # the run's span on the wall clock, for an event log (bench/spark_jobs.py --marks)
        MARKS.append({"label": ",".join(only or tables) + f" #{len(MARKS) + 1}", "start_s": started,
                      "end_s": time.time()})
    results = [next(t for t in report.tables if t.table == f"{DATABASE}.{name}") for name in tables]
    if report.failed or not all(r.rows_in for r in results):
        raise RuntimeError(f"merge did not merge every bench table: {report.tables}")
    return {"seconds": timer.wall_s, "driver_cpu_s": timer.cpu_s, "threads": threads,
            "windows": sum(r.windows for r in results), "rows_in": sum(r.rows_in for r in results),
            "rows_out": sum(r.rows_out for r in results), "checkpoint": results[0].checkpoint_after}


def _enable_deletion_vectors(spark, path: str) -> None:
    from tidelake.merge.replica_schema import enable_properties

    enable_properties(spark, path, {"delta.enableDeletionVectors": "true"})


def _enable_column_mapping(spark, path: str) -> None:
    from tidelake.merge.replica_schema import COLUMN_MAPPING, enable_properties

    enable_properties(spark, path, COLUMN_MAPPING)


@contextmanager
def _spark_windows():
    """Every window through Spark: no window on the driver (tidelake.merge.writers.delta_rs_writer)."""
    from tidelake.merge import table_merge

    saved = table_merge.DRIVER_WINDOW_MAX_ROWS
    table_merge.DRIVER_WINDOW_MAX_ROWS = -1
    try:
        yield
    finally:
        table_merge.DRIVER_WINDOW_MAX_ROWS = saved


@contextmanager
def _one_merge_per_window():
    """Every window as one MERGE, as before issue #12 item 3: no INSERT of new keys."""
    from tidelake.merge.writers import spark_writer

    saved = spark_writer.NEW_KEYS_CHECK_MAX_ROWS
    spark_writer.NEW_KEYS_CHECK_MAX_ROWS = -1  # no window is small enough to have its keys told apart
    try:
        yield
    finally:
        spark_writer.NEW_KEYS_CHECK_MAX_ROWS = saved


def _merge_one_by_one(spark, layout: LakeLayout, tables: list[str], variant: str,
                      history: HistoryConfig | None = None) -> dict:
    """Each table merged alone, the first with `variant` (deletion vectors, or the append paths;
    the others without): totals plus each table's seconds and the files its merge added."""
    from deltalake import DeltaTable

    alone = []
    for name in tables:
        path = ReplicaCatalog(layout).find(DATABASE, name).path
        before = DeltaTable(path).version()
        scd2 = history_path(layout, path) if history is not None and history.scd2 else None
        scd2_before = DeltaTable(scd2).version() if scd2 is not None else None
        plain = variant in (APPEND_PATHS, DRIVER_WINDOWS) and name != TABLE
        with (_spark_windows() if variant == DRIVER_WINDOWS else _one_merge_per_window()) if plain else nullcontext():
            merged = _merge(spark, layout, [name], 1, only=[f"{DATABASE}.{name}"], history=history)
        commits = DeltaTable(path).history(DeltaTable(path).version() - before)
        files = sum(_metric(h, "numTargetFilesAdded", "num_target_files_added") for h in commits)
        dvs = sum(int(h.get("operationMetrics", {}).get("numTargetDeletionVectorsAdded", 0)) for h in commits)
        alone.append({"table": name, "variant": variant, "on": name == TABLE, "seconds": merged["seconds"],
                      "files_added": files, "deletion_vectors_added": dvs,
                      "commits": [h.get("operation") for h in reversed(commits)],
                      **({"history_commits": _engines(scd2, scd2_before)} if scd2 is not None else {}),
                      **{k: merged[k] for k in ("windows", "rows_in", "rows_out")}})
    return {"seconds": sum(a["seconds"] for a in alone), "driver_cpu_s": None, "threads": 1,
            "windows": sum(a["windows"] for a in alone), "rows_in": sum(a["rows_in"] for a in alone), "rows_out": sum(a["rows_out"] for a in alone),
            "checkpoint": None, "alone": alone}


def _engines(path: str, before: int) -> list[str]:
    """The history table's commits after version `before`: operation and engine (delta-rs or Spark)."""
    from deltalake import DeltaTable

    table = DeltaTable(path)
    return [f"{h.get('operation')} by {str(h.get('engineInfo', '')).split('/')[0].split(' ')[0]}"
            for h in reversed(table.history(table.version() - before))]


def _metric(commit: dict, spark_name: str, delta_rs_name: str) -> int:
    """A commit's operation metric as Spark's Delta or delta-rs names it."""
    metrics = commit.get("operationMetrics") or {}
    return int(metrics.get(spark_name, metrics.get(delta_rs_name, 0)))


DELETION_VECTORS, APPEND_PATHS, DRIVER_WINDOWS = "deletion vectors", "append paths", "driver windows"
MARKS: list[dict] | None = None  # with --marks: each merge run's label and wall-clock span


def run(rows: int, txn_rows: int, update_ratio: float, seed: int, spark_confs: dict[str, str] | None = None,
        tables: int = 1, threads: int = 2, small_rows: int = 100, samples: int = 5,
        compare_deletion_vectors: bool = False, remote: str | None = None, compare_append: bool = False,
        compare_rewrite: bool = False, small_tables: int = 0, compare_driver: bool = False,
        soft_deletes: bool = False, scd2: bool = False, column_mapping: bool = False) -> dict:
    from tidelake.spark.spark_session import connect_session, get_session

    # Spark first: launching its JVM forks, and forking while gRPC threads run is unsafe.
    started = time.perf_counter()
    if remote is None:
        spark = get_session("bench-merge", master="local[2]", extra_confs=spark_confs)
    else:
        spark = connect_session(remote, spark_confs)
    session_start_s = time.perf_counter() - started
    every = (f"{DATABASE}.*",)
    history = HistoryConfig(scd2=every if scd2 else (), soft_deletes=every if soft_deletes else ()) \
        if scd2 or soft_deletes else None
    print(f"\nSpark session start ({remote or 'local[2]'}): {session_start_s:.1f} s; "
          f"extra confs: {spark_confs or 'none'}")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
            layout = LakeLayout(f"{tmp}/lake")
            cluster = SimCluster(n_stores=1, seed=seed, split_check_interval_s=0, gc_interval_s=0,
                                 cdc_options={"min_ts_interval_s": 0.2})
            with cluster:
                SimTiDB(cluster)  # TiDB's bootstrap (system tables, DDL job table) before the changefeed
                config = parse_config({
                    "changefeed": {"id": "bench"}, "upstream": {"pd": [cluster.pd_address], "gc_ttl": "10m"},
                    "filter": {"rules": [f"{DATABASE}.*"]}, "lake": {"root": layout.root},
                    "puller": {"flush_interval": "500ms"}}, "bench_merge")
                runner = PullerRunner(config, options=RunOptions(progress_interval_s=3600))
                errors: list[BaseException] = []
                thread = threading.Thread(target=lambda: _run_catching(runner, errors), daemon=True)
                thread.start()
                try:
                    _wait_durable(layout, None, 1, errors)  # first flush: the changefeed started
                    # created after the start, the table joins by its CREATE job (no bootstrap snapshot)
                    tidb = SimTiDB(cluster)
                    tidb.create_database(DATABASE)
                    names = [TABLE] + [f"{TABLE}_{i}" for i in range(2, tables + 1)]
                    upstreams = [_Upstream(cluster, tidb, name, seed) for name in names]
                    smalls = [_Upstream(cluster, tidb, f"small_{i}", seed + i) for i in range(small_tables)]
                    only = [f"{DATABASE}.{name}" for name in names] if smalls else None
                    plan = [(1, 0.0, threads), (2, update_ratio, 1)] + ([(3, update_ratio, threads)] if tables > 1 else [])
                    rounds = []
                    for n, ratio, merge_threads in plan:
                        for upstream in upstreams:
                            last = upstream.write(rows, txn_rows, ratio)
                            _wait_durable(layout, upstream.info.id, last, errors)
                        if n == 1 and smalls:
                            _write_small(layout, smalls, small_rows, txn_rows, 0.0, errors)
                        variant = (DELETION_VECTORS if compare_deletion_vectors else APPEND_PATHS if compare_append
                                   else DRIVER_WINDOWS if compare_driver else None)
                        if n == 1 and smalls:
                            rounds.append({"round": n, **_merge(spark, layout, names, merge_threads, history=history),
                                           "small_tables_created": small_tables})
                        elif n == 1 or variant is None:
                            rounds.append({"round": n, **_merge(spark, layout, names, merge_threads, only=only,
                                                                history=history)})
                        else:
                            rounds.append({"round": n, **_merge_one_by_one(spark, layout, names, variant, history)})
                        if n == 1 and compare_deletion_vectors:
                            _enable_deletion_vectors(spark, ReplicaCatalog(layout).find(DATABASE, TABLE).path)
                        if n == 1 and column_mapping:
                            for name in names + [u.name for u in smalls]:
                                _enable_column_mapping(spark, ReplicaCatalog(layout).find(DATABASE, name).path)
                    replica = ReplicaCatalog(layout).find(DATABASE, TABLE).path
                    ceiling = _append_ceiling(spark, replica, rounds[0]["checkpoint"], f"{tmp}/append")
                    if tables > 1 or smalls:
                        small = smalls or upstreams
                        _write_small(layout, small, small_rows, txn_rows, update_ratio, errors)
                        rounds.append({"round": "small", "changes": small_rows * len(small), "tables": len(small),
                                       **_merge(spark, layout, [u.name for u in small], threads,
                                                only=[f"{DATABASE}.{u.name}" for u in small] if smalls else None,
                                                history=history)})
                    fixed = _fixed_cost(spark, layout, upstreams[0], samples, errors, replica, f"{tmp}/append-1",
                                        history)
                    rewrite = _rewrite_vs_in_place(spark, layout, tidb, upstreams[:2], errors, ceiling) \
                        if compare_rewrite else None
                finally:
                    runner.stop()
                    thread.join(60)
    finally:
        spark.stop()
    return {**_report(rows, tables, rounds, ceiling, fixed, remote), "session_start_s": session_start_s,
            "soft_deletes": soft_deletes, "history": scd2, "column_mapping": column_mapping,
            **({"rewrite": rewrite} if rewrite else {})}


def _rewrite_vs_in_place(spark, layout: LakeLayout, tidb: SimTiDB, upstreams: list[_Upstream], errors: list,
                         ceiling: dict) -> dict:
    """A RENAME COLUMN merged into a replica without column mapping (rewritten) and into one with it
    (in place), each table alone."""
    from deltalake import DeltaTable

    from tidelake.merge.replica_schema import COLUMN_MAPPING, enable_properties

    paths = [ReplicaCatalog(layout).find(DATABASE, u.name).path for u in upstreams]
    enable_properties(spark, paths[1], COLUMN_MAPPING)
    for upstream in upstreams:
        tidb.rename_column(DATABASE, upstream.name, "note", "remark")
    last = upstreams[0].cluster.tso.next()
    for upstream in upstreams:
        _wait_durable(layout, upstream.info.id, last, errors)
    from tidelake.merge.merge_run import run_merge

    timed = []
    for upstream, path in zip(upstreams, paths):
        before = DeltaTable(path).version()
        with Timer() as timer:  # a window with the DDL and no row change: _merge's rows check does not apply
            report = run_merge(spark, layout, tables=[f"{DATABASE}.{upstream.name}"], write_log=False, threads=1)
        if report.failed or report.tables[0].ddls_applied != 1:
            raise RuntimeError(f"the RENAME COLUMN was not applied: {report.tables}")
        commits = [h.get("operation") for h in reversed(DeltaTable(path).history(DeltaTable(path).version() - before))]
        timed.append({"seconds": timer.wall_s, "commits": commits,
                      "rows": DeltaTable(path).to_pyarrow_dataset().count_rows()})
    rewritten, in_place = timed
    result = {"rows": rewritten["rows"], "rewrite_s": rewritten["seconds"], "in_place_s": in_place["seconds"],
              "rewrite_commits": rewritten["commits"], "in_place_commits": in_place["commits"],
              "rewrite_rows_per_s": rewritten["rows"] / rewritten["seconds"],
              "append_rows_per_s": ceiling["rows_per_s"]}
    result["rewrite_vs_append"] = result["rewrite_rows_per_s"] / ceiling["rows_per_s"]
    print(f"\nRENAME COLUMN of {result['rows']:,} rows: rewrite {result['rewrite_s']:.2f} s "
          f"({result['rewrite_rows_per_s']:,.0f} rows/s, {result['rewrite_vs_append']:.2f} of the append rate), "
          f"in place with column mapping {result['in_place_s']:.2f} s")
    return result


def _fixed_cost(spark, layout: LakeLayout, upstream: _Upstream, samples: int, errors: list, replica: str,
                path: str, history: HistoryConfig | None = None) -> dict:
    """Median warm seconds of a 1-change window (insert, update) against a 1-row Delta append."""
    name = f"{DATABASE}.{upstream.name}"
    times: dict[str, list[float]] = {"insert": [], "update": [], "append": []}
    one_row = spark.read.format("delta").load(replica).limit(1).cache()
    one_row.count()
    for _ in range(samples):
        for kind in ("insert", "update"):
            last = upstream.write_one(update=kind == "update")
            _wait_durable(layout, upstream.info.id, last, errors)
            merged = _merge(spark, layout, [upstream.name], 1, only=[name], history=history)
            if merged["rows_in"] != 1:
                raise RuntimeError(f"a 1-change window merged {merged['rows_in']} changes")
            times[kind].append(merged["seconds"])
        with Timer() as timer:
            one_row.write.format("delta").mode("append").save(path)
        times["append"].append(timer.wall_s)
    one_row.unpersist()
    return {"samples": samples, "insert_s": times["insert"], "update_s": times["update"],
            "append_s": times["append"], "fixed_cost_s": statistics.median(times["insert"] + times["update"]),
            "fixed_cost_insert_s": statistics.median(times["insert"]),
            "fixed_cost_update_s": statistics.median(times["update"]),
            "append_1row_s": statistics.median(times["append"])}


def _run_catching(runner: PullerRunner, errors: list) -> None:
    try:
        runner.run()
    except BaseException as exc:  # handed to the bench thread
        errors.append(exc)


def _append_ceiling(spark, replica: str, after_ts: int, path: str) -> dict:
    rows = spark.read.format("delta").load(replica).where(f"{COMMIT_TS_COLUMN} > {after_ts}").cache()
    count = rows.count()
    rows.limit(1).write.format("delta").mode("append").save(path + "-warm")  # Delta writer warm-up
    with Timer() as timer:
        rows.write.format("delta").mode("append").save(path)
    rows.unpersist()
    return {"rows": count, "seconds": timer.wall_s, "rows_per_s": count / timer.wall_s}


def _report(rows: int, tables: int, rounds: list[dict], ceiling: dict, fixed: dict, remote: str | None) -> dict:
    """Changes = changelog rows of the round (one per written key and txn); keys = the MERGE's
    source rows after collapsing to the last change per key; written = replica rows touched."""
    measured = rounds[1]
    changes = rows * tables
    change_rate = changes / measured["seconds"]
    out_rate = measured["rows_out"] / measured["seconds"]
    where = f"Spark Connect client of {remote}" if remote else "local[2] Spark"
    print(f"\n## Merge: {rows:,} changes per round into each of {tables} table(s) ({where})\n")
    print(markdown_table(
        ["run", "threads", "windows", "changes", "keys after collapse", "replica rows written", "s", "changes/s",
         "rows written/s"],
        [[f"round {r['round']}" + (" (creates replicas, warm-up)" if r["round"] == 1 else ""), r["threads"],
          r["windows"], r.get("changes", changes), r["rows_in"], r["rows_out"], r["seconds"],
          r.get("changes", changes) / r["seconds"], r["rows_out"] / r["seconds"]]
         for r in rounds]
        + [["ceiling: plain Delta append of the first table's rows merged after round 1", "-", "-", "-", "-",
            ceiling["rows"],
            ceiling["seconds"], "-", ceiling["rows_per_s"]]]))
    ratio = out_rate / ceiling["rows_per_s"]
    print(f"\nmerge (round 2) rows written/s / plain append rows/s = {ratio:.3f}")
    results = {"changes_per_round": rows, "tables": tables, "rounds": rounds, "append_ceiling": ceiling,
               "merge_changes_per_s": change_rate, "merge_rows_out_per_s": out_rate, "ratio_vs_append": ratio,
               "merge_rows_per_s": out_rate, "append_rows_per_s": ceiling["rows_per_s"], "fixed_cost": fixed,
               "fixed_cost_s": fixed["fixed_cost_s"], "append_1row_s": fixed["append_1row_s"]}
    print(f"\n## Fixed cost: {fixed['samples']} warm 1-change windows of each kind (medians)\n")
    print(markdown_table(["1-change window (insert)", "1-change window (update)", "both", "plain append of 1 row",
                          "fixed / append"],
                         [[fixed["fixed_cost_insert_s"], fixed["fixed_cost_update_s"], fixed["fixed_cost_s"],
                           fixed["append_1row_s"], fixed["fixed_cost_s"] / fixed["append_1row_s"]]]))
    if "alone" in measured:
        on = next(a for a in measured["alone"] if a["on"])
        off = [a for a in measured["alone"] if not a["on"]]
        off_s = statistics.median(a["seconds"] for a in off)
        variant = on["variant"]
        results[variant.replace(" ", "_")] = {"on": on, "off": off, "on_s_over_off_s": on["seconds"] / off_s}
        print(f"\n## Round 2, one table at a time: with and without {variant}\n")
        print(markdown_table(["table", variant, "s", "commits", "files added", "DVs added", "rows written"],
                             [[a["table"], a["on"], a["seconds"], " ".join(a["commits"]) + (
                                 f"; history: {', '.join(a['history_commits'])}" if "history_commits" in a else ""),
                               a["files_added"],
                               a["deletion_vectors_added"], a["rows_out"]] for a in measured["alone"]]))
        print(f"with / without {variant} (s) = {on['seconds'] / off_s:.2f}")
        if variant == DRIVER_WINDOWS:  # the first table took the code's path: the headline rate is its
            results["merge_rows_per_s"] = on["rows_out"] / on["seconds"]
            results["ratio_vs_append"] = results["merge_rows_per_s"] / ceiling["rows_per_s"]
            spark_rate = statistics.median(a["rows_out"] / a["seconds"] for a in off)
            results["spark_merge_rows_per_s"] = spark_rate
            print(f"round 2 rows written/s: driver {results['merge_rows_per_s']:,.0f}, Spark {spark_rate:,.0f}; "
                  f"driver / append = {results['ratio_vs_append']:.3f}, Spark / append = "
                  f"{spark_rate / ceiling['rows_per_s']:.3f}")
    if len(rounds) > 2 and rounds[2]["round"] == 3:
        results["threads_speedup"] = measured["seconds"] / rounds[2]["seconds"]
        print(f"round 2 s / round 3 s ({rounds[2]['threads']} threads vs 1) = {results['threads_speedup']:.2f}")
    small = next((r for r in rounds if r["round"] == "small"), None)
    if small is not None:
        results["tables_per_min"] = small["tables"] * 60 / small["seconds"]
        print(f"small round: {small['tables']} tables x {small['changes'] // small['tables']} changes in one run "
              f"({small['threads']} threads): {results['tables_per_min']:.1f} tables/min")
    return results


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000, help="changes per round")
    parser.add_argument("--txn-rows", type=int, default=1000)
    parser.add_argument("--update-ratio", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf for the session (repeatable), to measure a setting's effect")
    parser.add_argument("--tables", type=int, default=1, help="tables, each given the same writes")
    parser.add_argument("--threads", type=int, default=2, help="run_merge threads of rounds 1 and 3")
    parser.add_argument("--small-rows", type=int, default=100, help="changes per table of the small round")
    parser.add_argument("--small-tables", type=int, default=0,
                        help="the small round over this many more tables (default: the --tables ones)")
    parser.add_argument("--samples", type=int, default=5, help="1-change windows (of each kind) and 1-row appends")
    parser.add_argument("--compare-deletion-vectors", action="store_true",
                        help="time round 2 per table, the first with deletion vectors (needs --tables 2+)")
    parser.add_argument("--compare-append", action="store_true",
                        help="time round 2 per table, the first with the INSERT path, the others "
                             "one MERGE per window (needs --tables 2+)")
    parser.add_argument("--compare-driver", action="store_true",
                        help="time round 2 per table, the first with small windows on the driver (delta-rs), "
                             "the others through Spark (needs --tables 2+)")
    parser.add_argument("--compare-rewrite", action="store_true",
                        help="at the end, a RENAME COLUMN rewritten vs in place with column mapping (needs --tables 2+)")
    parser.add_argument("--soft-deletes", action="store_true",
                        help="every bench replica keeps deleted rows flagged ([history] soft_deletes)")
    parser.add_argument("--history", action="store_true",
                        help="every bench replica gets an SCD2 history table ([history] scd2)")
    parser.add_argument("--column-mapping", action="store_true",
                        help="every bench replica gets column mapping (name mode) after round 1")
    parser.add_argument("--remote", metavar="sc://HOST:PORT|start",
                        help="also measure as a Spark Connect client of this server ('start': one of our own)")
    parser.add_argument("--connect-only", metavar="sc://HOST:PORT", help=argparse.SUPPRESS)  # the child below
    parser.add_argument("--json", help="also write the results as JSON here")
    parser.add_argument("--marks", help="also write each merge run's tables and wall-clock span here (JSON lines)")
    args = parser.parse_args(argv)
    if args.tables < 1 or args.threads < 1 or args.samples < 1 or args.small_rows < 1 or args.small_tables < 0:
        parser.error("--tables, --threads, --samples and --small-rows must be at least 1, --small-tables at least 0")
    compares = (args.compare_deletion_vectors, args.compare_append, args.compare_driver)
    if (any(compares) or args.compare_rewrite) and args.tables < 2:
        parser.error("--compare-deletion-vectors, --compare-append, --compare-driver and --compare-rewrite "
                     "need --tables 2 or more")
    if sum(compares) > 1:
        parser.error("--compare-deletion-vectors, --compare-append and --compare-driver are separate runs")
    if args.remote is not None and args.remote != "start" and not args.remote.startswith("sc://"):
        parser.error("--remote takes a Spark Connect URL (sc://host:port) or 'start'")
    confs = dict(c.split("=", 1) for c in args.spark_conf)
    global MARKS
    MARKS = [] if args.marks else None
    env = print_environment()
    measure = lambda remote: run(args.rows, args.txn_rows, args.update_ratio, args.seed, confs,  # noqa: E731
                                 args.tables, args.threads, args.small_rows, args.samples,
                                 args.compare_deletion_vectors, remote, args.compare_append, args.compare_rewrite,
                                 args.small_tables, args.compare_driver, args.soft_deletes, args.history,
                                 args.column_mapping)
    if args.connect_only is not None:
        results = measure(args.connect_only)
        write_json(args.json, "merge", env, results)
        return results
    results = measure(None)
    if MARKS is not None:
        Path(args.marks).write_text("".join(json.dumps(m) + "\n" for m in MARKS))
    if args.remote is not None:
        results["connect"] = _measure_connect(args.remote, argv if argv is not None else sys.argv[1:])
        results["connect_vs_local"] = _compare(results, results["connect"])
    write_json(args.json, "merge", env, results)
    return results


def _measure_connect(remote: str, argv: list[str]) -> dict:
    """The same measurement by a Spark Connect client in a child process (as a merge task is: no
    JVM in it; a process that ran a local session keeps pyspark in classic mode), of `remote` or
    of a server started here on local[2] (as the local measurement) and stopped after."""
    if remote != "start":
        return _connect_child(remote, argv)
    from tidelake.demos.supervisor import free_port
    from tidelake.spark import connect_server

    with tempfile.TemporaryDirectory(prefix="bench-spark-server-") as folder:
        settings = connect_server.ServerSettings(Path(folder), port=free_port(connect_server.DEFAULT_PORT),
                                               master="local[2]")
        with Timer() as timer:
            connect_server.start(settings)
        print(f"\nSpark Connect server started in {timer.wall_s:.1f} s (paid once, not per merge run)")
        try:
            return {**_connect_child(settings.url, argv), "server_start_s": timer.wall_s}
        finally:
            connect_server.stop(settings)


def _connect_child(url: str, argv: list[str]) -> dict:
    import subprocess

    own = {"--remote", "--json", "--marks"}
    kept = [a for i, a in enumerate(argv) if a not in own and (i == 0 or argv[i - 1] not in own)]
    with tempfile.TemporaryDirectory(prefix="bench-merge-connect-") as folder:
        out = Path(folder) / "connect.json"
        subprocess.run([sys.executable, __file__, *kept, "--connect-only", url, "--json", str(out)], check=True)
        return json.loads(out.read_text())["results"]


def _compare(local: dict, connect: dict) -> dict:
    """Connect / local for each headline figure (below 1: Connect is faster or cheaper)."""
    keys = ("session_start_s", "fixed_cost_s", "append_1row_s")
    ratios = {f"{k}_ratio": connect[k] / local[k] for k in keys}
    ratios["merge_rows_per_s_ratio"] = connect["merge_rows_per_s"] / local["merge_rows_per_s"]
    ratios["fixed_over_append"] = {"local": local["fixed_cost_s"] / local["append_1row_s"],
                                   "connect": connect["fixed_cost_s"] / connect["append_1row_s"]}
    ratios["merge_over_append"] = {"local": local["ratio_vs_append"], "connect": connect["ratio_vs_append"]}
    print("\n## Spark Connect client vs local session (same run)\n")
    print(markdown_table(["", "local[2]", "Spark Connect", "connect / local"],
                         [[k, local[k], connect[k], ratios[f"{k}_ratio"]] for k in keys]
                         + [["merge rows/s (round 2)", local["merge_rows_per_s"], connect["merge_rows_per_s"],
                             ratios["merge_rows_per_s_ratio"]],
                            ["merge / append", local["ratio_vs_append"], connect["ratio_vs_append"], "-"]]))
    return ratios


if __name__ == "__main__":
    main()
