"""One changefeed over many tables and regions: what the puller, PD and the control tables cost.

Setup (this process): a SimCluster of --stores stores and a SimTiDB with --tables tables in one
database (every --partitioned-every-th one hash-partitioned into 4), their record spans split into
about --regions regions in all (leaders spread over the stores by the simulator's placement), and
a backlog of --backlog-rows rows per table committed after the changefeed's start ts T0.

Then for each shard count in --shards (fresh lake each, all starting at T0): `tidelake pull`
child processes, one per shard, while a traffic thread commits light traffic on every table
(--light-rate txn/s round-robin), hot traffic on --hot-tables tables (--hot-rate txn/s) and, once
every table is resolved, a DDL every --ddl-interval s (ADD COLUMN, then TRUNCATE TABLE, in turn).
Every --sample-interval s it scrapes each shard's /metrics (resolved ts per physical table) and
reads psutil CPU and RSS. It reports, per shard count:
  start          seconds from spawn until every table has a resolved ts above T0 (the backlog's
                 incremental scans done), and until the worst table is within 5 s of now (caught up);
  steady         --steady s after that: worst-table lag p50/p95/max (now - min resolved ts over all
                 tables, from the metrics), puller CPU as cores (CPU s / wall s, all shards) and per
                 1,000 rows of traffic, peak RSS per shard, threads per shard;
  PD             RPCs the simulated PD received during the run, by method;
  control        after the run: watermarks and DDL table rows, Delta versions, files, and read times
                 (`read_watermarks`, `read_control`), and `collect_status` latency.
With --compare-puller DIR (a checkout of another version, e.g. main), the first shard count runs
--compare-rounds more times for each version, alternating (DIR, this, DIR, this...) on the same
upstream and traffic: before/after puller CPU at the same size and load.
Then, in this process:
  frontier       cost of one resolved ts through the span frontier with the real region layout:
                 forward + frontier() per region, and per round over all regions;
  history        --history-flushes watermark flushes of --tables rows into a fresh table (a puller
                 of that many tables flushing once a second for that many seconds), read time of
                 the watermarks table sampled as the history grows;
  status         with --status-replicas R > 0, on the first run's lake: R of its tables get a replica
                 written with delta-rs as a merge leaves it (--replica-commits commits, each with
                 rows and the merge's txn; every 10th with soft deletes and a history table), and
                 one merge-log append with each replica's facts (the merge's own read). Then
                 `collect_status` as status and the page run it (facts from the merge log),
                 `collect_status(exact=True)` (every replica's log), each against the ceiling of
                 one replica's log replay (`read_replica_facts`, median) measured in the same run;
                 then status and the Replication page's report (`page_report`, then its JSON and
                 its HTML) once the merge log holds --merge-log-runs runs over them all,
                 --merge-log-interval seconds apart,
                 against the ceiling of reading the whole log; then both after the merge log's
                 maintenance (`merge_log.trim`, the default retention);
  merge          with --merge-tables K > 0: K more tables created after a new changefeed's start
                 (tables of a start snapshot would need a bootstrap first), 20 rows each, pulled
                 by one shard; then `tidelake merge` of them with /tmp/tidelake-spark.lock held
                 (Spark): its wall time and tables/min, and status latency with K replicas.

    .venv/bin/python bench/bench_scale.py [--tables 1000] [--regions 10000] [--shards 1,4]
        [--steady 60] [--history-flushes 1200] [--status-replicas 1000] [--merge-tables 0]
        [--compare-puller DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import psutil
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import MIB, markdown_table, percentile, print_environment, write_json  # noqa: E402
from tidelake import tso  # noqa: E402
from tidelake.capture.eventfeed.frontier import SpanFrontier  # noqa: E402
from tidelake.capture.eventfeed.span_divider import intersect  # noqa: E402
from tidelake.codec.keys import record_key, table_record_span_encoded  # noqa: E402
from tidelake.codec.memcomparable_bytes import encode_bytes  # noqa: E402
from tidelake.config import load_config  # noqa: E402
from tidelake.config_writer import changefeed_document, write_config  # noqa: E402
from tidelake.lake.control import read_control  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.checkpoint import MERGE_APP_ID  # noqa: E402
from tidelake.lake.history_table import HISTORY_APP_ID, SINCE_PROPERTY, SOFT_DELETES_PROPERTY, history_path  # noqa: E402
from tidelake.merge.merge_log import (
    DEFAULT_RETENTION,
    MergeLogEntry,
    MergeStatus,
    append_entries,
    merge_log_path,
    open_merge_log,
    trim,
)
from tidelake.lake.replica_catalog import ReplicaCatalog, ReplicaEntry  # noqa: E402
from tidelake.lake.replica_facts import read_replica_facts  # noqa: E402
from tidelake.status.status_report import FactsSource, collect_status  # noqa: E402
from tidelake.capture.landing.watermark_writer import WatermarkWriter  # noqa: E402
from tidelake.lake.watermarks import read_watermarks
from tidelake.orchestration.changefeeds import Changefeed  # noqa: E402
from tidelake.orchestration.page_report import page_report  # noqa: E402
from tidelake.orchestration.plugin_views import render_page  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402

DATABASE = "scale"
SPARK_LOCK = "/tmp/tidelake-spark.lock"
CAUGHT_UP_S = 5.0
_PROGRESS = re.compile(r"pull \S+: (\d+) tables, \d+ rows .*?(?:max lag ([\d.]+)s|no tables)")


# ---- the upstream ------------------------------------------------------------------------------

class Upstream:
    """The cluster, its tables and a key counter per table (inserts never collide)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.cluster = SimCluster(n_stores=args.stores, seed=args.seed, gc_interval_s=0, split_check_interval_s=0)
        self.cluster.start()
        self.tidb = SimTiDB(self.cluster)
        self.tidb.create_database(DATABASE)
        self.names = [f"t{i:04d}" for i in range(args.tables)]
        started = time.perf_counter()
        for i, name in enumerate(self.names):
            partition = ({"type": "hash", "column": "id", "count": 4}
                         if args.partitioned_every and i % args.partitioned_every == 0 else None)
            self.tidb.create_table(DATABASE, name, [("id", "bigint"), ("v", "varchar(64)")], primary_key=["id"],
                                   partition=partition)
        self.create_s = time.perf_counter() - started
        self.next_key = Counter()
        started = time.perf_counter()
        self._split(args.regions)
        self.split_s = time.perf_counter() - started
        self.start_ts = self.cluster.tso.next()
        started = time.perf_counter()
        self.backlog_rows = self._backlog(args.backlog_rows)
        self.backlog_s = time.perf_counter() - started

    def physical_ids(self) -> set[int]:
        return {pid for db, _, info in self.tidb.tables() if db == DATABASE for pid in info.physical_ids()}

    def _split(self, regions: int) -> None:
        """Split every physical table's record span evenly until the cluster has ~`regions` regions."""
        pids = sorted(self.physical_ids())
        per_table = max(1, (regions - len(self.cluster.regions.all())) // len(pids) + 1)
        for pid in pids:
            for k in range(1, per_table):
                key = encode_bytes(record_key(pid, k * 1_000_000))
                region = self.cluster.regions.locate(key)
                if region.start_key != key:
                    self.cluster.regions.split(region.id, key)

    def _backlog(self, per_table: int) -> int:
        rows = 0
        for name in self.names:
            with self.tidb.txn() as txn:
                for _ in range(per_table):
                    rows += self.insert(txn, name)
        return rows

    def insert(self, txn, name: str) -> int:
        self.next_key[name] += 1
        txn.insert(DATABASE, name, {"id": self.next_key[name] * 997, "v": f"row {self.next_key[name]}"})
        return 1

    def close(self) -> None:
        self.cluster.stop()


class Traffic:
    """Light traffic on all tables, hot traffic on a few, and a DDL now and then (once allowed)."""

    def __init__(self, up: Upstream, light_rate: float, hot_tables: int, hot_rate: float, ddl_interval_s: float,
                 seed: int) -> None:
        self.up = up
        self.light_rate, self.hot_rate, self.ddl_interval_s = light_rate, hot_rate, ddl_interval_s
        self.hot = up.names[:hot_tables]
        self.rows = self.txns = self.ddls = self.errors = 0
        self.ddl_allowed = threading.Event()
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scale-traffic", daemon=True)
        self._light = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        rate = self.light_rate + (self.hot_rate if self.hot else 0)
        if rate <= 0:
            return
        next_ddl = None
        kinds = ["add_column", "truncate_table"]
        while not self._stop.is_set():
            began = time.monotonic()
            if self.hot and self._rng.random() < self.hot_rate / rate:
                name = self._rng.choice(self.hot)
            else:
                name = self.up.names[self._light % len(self.up.names)]
                self._light += 1
            try:
                with self.up.tidb.txn() as txn:
                    self.rows += self.up.insert(txn, name)
                self.txns += 1
                if self.ddl_allowed.is_set() and self.ddl_interval_s > 0:
                    now = time.monotonic()
                    next_ddl = next_ddl or now + self.ddl_interval_s
                    if now >= next_ddl:
                        self._ddl(kinds[self.ddls % len(kinds)])
                        next_ddl = now + self.ddl_interval_s
            except Exception:  # noqa: BLE001 - a failed statement is counted, the load goes on
                self.errors += 1
            self._stop.wait(max(0.0, 1 / rate - (time.monotonic() - began)))

    def _ddl(self, kind: str) -> None:
        name = self._rng.choice(self.up.names[len(self.hot):] or self.up.names)
        if kind == "add_column":
            self.up.tidb.add_column(DATABASE, name, (f"c{self.ddls}", "int"))
        else:
            self.up.tidb.truncate_table(DATABASE, name)
        self.ddls += 1


# ---- the pullers -------------------------------------------------------------------------------

class Shards:
    """`tidelake pull --shard I/N` children; their progress lines (parsed on threads), CPU and RSS."""

    def __init__(self, config: Path, count: int, log_dir: Path, source: Path | None = None) -> None:
        self.count = count
        env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
        self.procs = [subprocess.Popen(
            [sys.executable, "-m", "tidelake", "pull", "--config", str(config), "--shard", f"{i}/{count}",
             "--progress-interval", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            cwd=source, env=env)
            for i in range(count)]
        self.log_paths = [log_dir / f"shards{count}-{i}-{time.monotonic_ns()}.log" for i in range(count)]
        self.lag: list[tuple[float, float] | None] = [None] * count  # (monotonic, worst table lag s)
        self.tables = [0] * count  # physical tables each shard pulls (its last progress line)
        self._threads = [threading.Thread(target=self._read, args=(i,), daemon=True) for i in range(count)]
        for thread in self._threads:
            thread.start()
        self.ps = [psutil.Process(p.pid) for p in self.procs]
        self.rss_peak = [0] * count
        self.threads_peak = [0] * count

    def _read(self, i: int) -> None:
        with open(self.log_paths[i], "w") as log:
            for line in self.procs[i].stderr:  # type: ignore[union-attr]
                log.write(line)
                found = _PROGRESS.search(line)
                if found:  # a shard with no table has no lag
                    self.tables[i] = int(found.group(1))
                    self.lag[i] = (time.monotonic(), float(found.group(2) or 0.0))

    def alive(self) -> None:
        for i, proc in enumerate(self.procs):
            if proc.poll() is not None:
                time.sleep(0.5)
                tail = self.log_paths[i].read_text().splitlines()[-15:]
                raise RuntimeError(f"shard {i} exited {proc.returncode}:\n" + "\n".join(tail))

    def worst_lag(self, since: float) -> float | None:
        """The worst table's lag over all shards, from progress lines newer than `since`."""
        if any(lag is None or lag[0] < since for lag in self.lag):
            return None
        return max(lag[1] for lag in self.lag)  # type: ignore[index]

    def cpu_s(self) -> float:
        return sum(p.cpu_times().user + p.cpu_times().system for p in self.ps)

    def sample_memory(self) -> None:
        for i, p in enumerate(self.ps):
            try:
                self.rss_peak[i] = max(self.rss_peak[i], p.memory_info().rss)
                self.threads_peak[i] = max(self.threads_peak[i], p.num_threads())
            except psutil.NoSuchProcess:
                pass

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for thread in self._threads:
            thread.join(5)


def puller_run(up: Upstream, traffic: Traffic, shards: int, args: argparse.Namespace, tmp: Path,
               source: Path | None = None, label: str = "") -> dict:
    """One changefeed from T0 pulled by `shards` children (run from the checkout `source` when
    given: --compare-puller), through start, catch-up and --steady seconds of steady state."""
    lake = tmp / f"lake-{shards}{label}"
    doc = changefeed_document(f"scale{shards}{label}", [up.cluster.pd_address], lake, rules=[f"{DATABASE}.*"],
                              start_ts=up.start_ts, gc_ttl="30m",
                              puller={"flush_interval": args.flush_interval, "memory_quota": args.quota,
                                      "shards": shards})
    config = write_config(tmp / f"scale{shards}{label}.toml", doc)
    pd_before = up.cluster.pd_calls.snapshot()
    rows_before, txns_before = traffic.rows, traffic.txns
    traffic.ddl_allowed.clear()
    started = time.monotonic()
    group = Shards(config, shards, tmp, source)
    all_resolved_s = caught_up_s = None
    lags: list[float] = []
    try:
        # Start and catch-up. A table's resolved ts starts at T0, so the worst table is above T0
        # (every table resolved once) when its lag is below now - T0 by more than a sample's age.
        while caught_up_s is None:
            group.alive()
            group.sample_memory()
            now = time.monotonic()
            if now - started > args.start_timeout:
                raise TimeoutError(f"{shards} shard(s): tables not caught up after {args.start_timeout:.0f}s "
                                   f"(all resolved: {all_resolved_s})")
            lag = group.worst_lag(now - 2 * args.sample_interval)
            if lag is not None:
                since_t0 = tso.lag_seconds(up.start_ts, up.cluster.tso.current())
                if all_resolved_s is None and lag < since_t0 - 1.5:
                    all_resolved_s = now - started
                if all_resolved_s is not None and lag <= CAUGHT_UP_S:
                    caught_up_s = now - started
            time.sleep(args.sample_interval / 2)
        catchup_cpu = group.cpu_s()
        traffic.ddl_allowed.set()
        steady_from, cpu_from = time.monotonic(), group.cpu_s()
        rows_from = traffic.rows
        reads_during = []
        while time.monotonic() - steady_from < args.steady:
            group.alive()
            group.sample_memory()
            lag = group.worst_lag(time.monotonic() - 2 * args.sample_interval)
            if lag is not None:
                lags.append(lag)
            reads_during.append(_timed(lambda: read_watermarks(LakeLayout(str(lake))))[0])
            time.sleep(args.sample_interval)
        steady_wall = time.monotonic() - steady_from
        steady_cpu = group.cpu_s() - cpu_from
        steady_rows = traffic.rows - rows_from
        traffic.ddl_allowed.clear()
    finally:
        group.stop()
    pd_after = up.cluster.pd_calls.snapshot()
    pd_calls = {k: pd_after.get(k, 0) - pd_before.get(k, 0) for k in sorted(pd_after) if
                pd_after.get(k, 0) - pd_before.get(k, 0)}
    layout = LakeLayout(str(lake))
    result = {
        "shards": shards, "puller": label or "this checkout", "physical_tables": len(up.physical_ids()), "regions": len(up.cluster.regions.all()),
        "all_resolved_s": all_resolved_s, "caught_up_s": caught_up_s, "catchup_cpu_s": catchup_cpu,
        "steady_s": steady_wall, "lag_p50_s": percentile(lags, 50) if lags else None,
        "lag_p95_s": percentile(lags, 95) if lags else None, "lag_max_s": max(lags) if lags else None,
        "lag_samples": len(lags), "steady_cores": steady_cpu / steady_wall,
        "traffic_rows_per_s": steady_rows / steady_wall,
        "cpu_ms_per_1000_rows": 1e6 * steady_cpu / steady_rows if steady_rows else None,
        "rss_peak_mib_per_shard": [b / MIB for b in group.rss_peak],
        "threads_peak_per_shard": group.threads_peak, "tables_per_shard": group.tables,
        "pd_calls": pd_calls, "traffic_txns": traffic.txns - txns_before, "traffic_rows": traffic.rows - rows_before,
        "ddls": traffic.ddls, "watermark_read_during_steady_ms": [1000 * x for x in reads_during],
        "control": control_tables(layout),
    }
    print(f"# {shards} shard(s){label}: all resolved {all_resolved_s:.1f} s, caught up {caught_up_s:.1f} s, "
          f"lag p95 {result['lag_p95_s']}, cores {result['steady_cores']:.2f}", flush=True)
    return result


def _timed(fn, repeats: int = 1):
    best, value = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - began)
    return best, value


def _delta_stats(path: str) -> dict:
    log = Path(path) / "_delta_log"
    if not log.exists():
        return {"versions": 0, "files": 0, "log_mib": 0.0}
    commits = list(log.glob("*.json"))
    data = [p for p in Path(path).rglob("*.parquet") if "_delta_log" not in p.parts]
    return {"versions": len(commits), "data_files": len(data), "checkpoints": len(list(log.glob("*.checkpoint*"))),
            "log_mib": sum(p.stat().st_size for p in log.iterdir() if p.is_file()) / MIB}


def control_tables(layout: LakeLayout) -> dict:
    wm_s, marks = _timed(lambda: read_watermarks(layout), 3)
    control_s, control = _timed(lambda: read_control(layout), 3)
    status_s, report = _timed(lambda: collect_status(layout), 3)
    return {
        "watermark_rows": len(marks.table_resolved) + 1, "watermarks": _delta_stats(layout.watermarks),
        "watermarks_read_ms": 1000 * wm_s, "ddl": _delta_stats(layout.ddl),
        "control_read_ms": 1000 * control_s, "status_ms": 1000 * status_s, "status_tables": len(report.tables),
        "history_tables": len(list(control.history.tables())),
    }


# ---- in-process measurements ------------------------------------------------------------------

def _merge_commit(path: str, txn_app: str, version: int) -> None:
    """A commit as a merge window leaves one: rows plus the app's txn (version = the checkpoint)."""
    rows = pa.table({"id": pa.array([version % 997], pa.int64()), "_tidb_commit_ts": pa.array([version], pa.int64())})
    write_deltalake(path, rows, mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction(txn_app, version)]))


def status_at_scale(config: Path, replicas: int, commits: int, runs: int, ts: int, interval_s: float) -> dict:
    """`replicas` replicas as merges leave them and their merge-log entries, then status latency;
    then status and the Replication page's report once the merge log holds `runs` runs over every
    table, `interval_s` apart, against the ceiling of reading the whole log; then both again after
    the merge log's maintenance (`merge_log.trim`)."""
    feed = Changefeed(str(config), load_config(config), True)
    layout = LakeLayout.from_config(feed.config.lake)
    history = read_control(layout).history
    keys = sorted(history.live_tables())[:replicas]
    catalog = ReplicaCatalog(layout)
    began = time.perf_counter()
    entries, now = [], datetime.now(timezone.utc)
    names = {key: history.current_name(key) for key in keys}
    for start in range(0, len(keys), 10):  # as merges of 10 new tables each leave the catalog
        catalog.upsert([ReplicaEntry(key, *names[key], layout.replica_path(*names[key]), state_ts=ts)
                        for key in keys[start:start + 10]])
    for i, key in enumerate(keys):
        db, name = names[key]
        path = layout.replica_path(db, name)
        for c in range(commits):
            _merge_commit(path, MERGE_APP_ID, ts + c)
        if i % 10 == 0:  # soft deletes and an SCD2 history table, as [history] turns them on
            DeltaTable(path).alter.set_table_properties({SOFT_DELETES_PROPERTY: "true"}, raise_if_not_exists=False)
            _merge_commit(history_path(layout, path), HISTORY_APP_ID, ts + commits - 1)
            DeltaTable(history_path(layout, path)).alter.set_table_properties(
                {SINCE_PROPERTY: str(ts)}, raise_if_not_exists=False)
        facts = read_replica_facts(layout, path)
        entries.append(MergeLogEntry("bench", key, f"{db}.{name}", MergeStatus.MERGED, ts, ts + commits - 1, commits,
                                     0, commits, commits, 0.1, None, now, now, facts))
    append_entries(layout, entries)
    build_s = time.perf_counter() - began
    paths = [layout.replica_path(*names[k]) for k in keys[:50]]
    one_read = statistics.median(_timed(lambda p=p: read_replica_facts(layout, p))[0] for p in paths)
    cheap_s, cheap = _timed(lambda: collect_status(layout), 3)
    young_page_s, _ = _timed(lambda: page_report(feed), 3)
    exact_s, exact = _timed(lambda: collect_status(layout, exact=True), 3)
    from_log = sum(t.facts_source == FactsSource.MERGE_LOG for t in cheap.tables)
    mismatched = [t.table for t, e in zip(cheap.tables, exact.tables) if t.checkpoint_ts != e.checkpoint_ts]
    if mismatched:
        raise RuntimeError(f"status from the merge log disagrees with the replicas for {mismatched[:5]}")
    began_runs = time.perf_counter()
    for run in range(1, runs):  # later runs over every table, as a scheduled merge logs them
        later = now + timedelta(seconds=run * interval_s)
        append_entries(layout, [dataclasses.replace(e, run_id=f"bench{run}", started_at=later, finished_at=later)
                                for e in entries])
    runs_s = time.perf_counter() - began_runs
    log_path = merge_log_path(layout)
    files = len(DeltaTable(log_path).file_uris())
    full_s, _ = _timed(lambda: DeltaTable(log_path).to_pyarrow_table(), 3)  # the whole log: what main read
    aged_s, aged = _timed(lambda: collect_status(layout), 3)
    page_s, page = _timed(lambda: page_report(feed), 3)
    page_json_s, page_json = _timed(lambda: json.dumps(page), 3)  # what the JSON endpoint serializes
    page_html_s, _ = _timed(lambda: render_page([page]), 3)
    trim_s, (deleted, compacted) = _timed(lambda: trim(open_merge_log(layout), DEFAULT_RETENTION))
    trimmed_s, trimmed = _timed(lambda: collect_status(layout), 3)
    trimmed_page_s, _ = _timed(lambda: page_report(feed), 3)
    if [t.checkpoint_ts for t in trimmed.tables] != [t.checkpoint_ts for t in exact.tables]:
        raise RuntimeError("status after the merge log's maintenance disagrees with the replicas")
    return {"replicas": len(keys), "commits_per_replica": commits, "tables": len(cheap.tables), "build_s": build_s,
            "replica_read_ms": 1000 * one_read, "status_ms": 1000 * cheap_s, "status_from_merge_log": from_log,
            "page_ms": 1000 * young_page_s,
            "status_exact_ms": 1000 * exact_s, "status_in_replica_reads": cheap_s / one_read,
            "exact_in_replica_reads": exact_s / one_read, "merge_log_runs": runs,
            "merge_log_rows": runs * len(entries), "status_ms_after_runs": 1000 * aged_s,
            "page_ms_after_runs": 1000 * page_s,
            "page_json_ms_after_runs": 1000 * page_json_s, "page_json_bytes_after_runs": len(page_json),
            "page_render_ms_after_runs": 1000 * page_html_s,
            "status_from_merge_log_after_runs": sum(t.facts_source == FactsSource.MERGE_LOG for t in aged.tables),
            "merge_log_interval_s": interval_s, "merge_log_write_s": runs_s, "merge_log_files": files,
            "merge_log_full_read_ms": 1000 * full_s, "page_window": page["history_window"],
            "page_runs_shown": len(page["apply_runs"]), "trim_s": trim_s, "trim_rows_deleted": deleted,
            "trim_files_compacted": compacted, "merge_log_files_after_trim": len(DeltaTable(log_path).file_uris()),
            "status_ms_after_trim": 1000 * trimmed_s, "page_ms_after_trim": 1000 * trimmed_page_s,
            "status_from_merge_log_after_trim": sum(t.facts_source == FactsSource.MERGE_LOG for t in trimmed.tables)}


def frontier_cost(up: Upstream) -> dict:
    """Forward every region of every table once (a resolved-ts round) through real-layout frontiers."""
    regions = up.cluster.regions.all()
    layouts = []
    for pid in sorted(up.physical_ids()):
        span = table_record_span_encoded(pid)
        pieces = [p for p in (intersect(span, (r.start_key, r.end_key)) for r in regions) if p is not None]
        layouts.append((span, pieces))
    frontiers = [SpanFrontier(span[0], span[1], 1) for span, _ in layouts]
    forwards = 0
    began = time.perf_counter()
    for ts in range(2, 7):
        for frontier, (_, pieces) in zip(frontiers, layouts):
            for start, end in pieces:
                frontier.forward(start, end, ts)
                frontier.frontier()
                forwards += 1
    elapsed = time.perf_counter() - began
    rounds = 5
    return {"regions_in_tables": forwards // rounds, "us_per_region_resolved": 1e6 * elapsed / forwards,
            "ms_per_round_all_regions": 1000 * elapsed / rounds}


def history_growth(tables: int, flushes: int, tmp: Path, samples: int = 8) -> dict:
    """A puller of `tables` ids flushing `flushes` times: watermark read time as the history grows."""
    layout = LakeLayout(str(tmp / "lake-history"))
    writer = WatermarkWriter(layout, "history")
    ids = list(range(1000, 1000 + tables))
    points, write_times = [], []
    marks_at = {max(1, flushes * (i + 1) // samples) for i in range(samples)} | {1, 10}
    for seq in range(1, flushes + 1):
        ts = tso.compose(1_700_000_000_000 + seq * 1000)
        began = time.perf_counter()
        writer.write({t: ts for t in ids}, ts, seq, 0, seq)
        write_times.append(time.perf_counter() - began)
        if seq in marks_at:
            read_s, _ = _timed(lambda: read_watermarks(layout), 3)
            points.append({"flushes": seq, "read_ms": 1000 * read_s, **_delta_stats(layout.watermarks)})
    return {"tables": tables, "flushes": flushes, "write_ms_median": 1000 * statistics.median(write_times),
            "points": points}


def merge_landed(up: Upstream, tables: int, tmp: Path) -> Path:
    """A changefeed of `tables` new tables created after its start (tables of the start snapshot
    would need a bootstrap before any merge), each with 20 rows, pulled by one shard until every
    table's durable watermark covers its rows: what `merge_run` then merges."""
    start = up.cluster.tso.next()
    names = [f"m{i:04d}" for i in range(tables)]
    for name in names:
        up.tidb.create_table(DATABASE, name, [("id", "bigint"), ("v", "varchar(64)")], primary_key=["id"])
        with up.tidb.txn() as txn:
            for _ in range(20):
                up.insert(txn, name)
    written = up.cluster.tso.next()
    pids = {up.tidb.resolve_table(DATABASE, name)[1].id for name in names}
    lake = tmp / "lake-merge"
    doc = changefeed_document("scalemerge", [up.cluster.pd_address], lake, rules=[f"{DATABASE}.m*"],
                              start_ts=start, gc_ttl="30m", puller={"flush_interval": "1s"})
    group = Shards(write_config(tmp / "scalemerge.toml", doc), 1, tmp)
    began = time.monotonic()
    try:
        while True:
            group.alive()
            marks = read_watermarks(LakeLayout(str(lake)))
            if marks.ddl_resolved >= written and all(marks.table_resolved.get(p, 0) >= written for p in pids):
                return lake
            if time.monotonic() - began > 300:
                raise TimeoutError(f"the {tables} tables to merge were not landed within 300 s")
            time.sleep(0.5)
    finally:
        group.stop()


def merge_run(lake: Path, tables: list[str]) -> dict:
    """`tidelake merge` of these tables on local Spark, holding the shared Spark lock (the wait
    for it is not timed)."""
    cmd = [sys.executable, "-m", "tidelake", "merge", "--lake", str(lake)]
    for name in tables:
        cmd += ["--table", f"{DATABASE}.{name}"]
    with open(SPARK_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        began = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"merge exited {proc.returncode}:\n" + "\n".join(proc.stderr.splitlines()[-15:]))
    layout = LakeLayout(str(lake))
    status_s, report = _timed(lambda: collect_status(layout), 3)
    merged = [t for t in report.tables if t.checkpoint_ts is not None]
    if len(merged) != len(tables):
        raise RuntimeError(f"merge left {len(tables) - len(merged)} of {len(tables)} tables without a checkpoint:\n"
                           + "\n".join(proc.stderr.splitlines()[-15:]))
    return {"tables": len(tables), "wall_s": wall, "tables_per_min": 60 * len(tables) / wall,
            "replicas_with_checkpoint": len(merged), "status_ms_with_replicas": 1000 * status_s}


# ---- report ------------------------------------------------------------------------------------

def print_report(results: dict) -> None:
    up, runs = results["upstream"], results["runs"]
    print(f"\n## Scale: {up['tables']} tables ({up['physical_tables']} physical), {up['regions']} regions on "
          f"{up['stores']} stores; backlog {up['backlog_rows']:,} rows after T0\n")
    print(f"setup: CREATE TABLE x{up['tables']} {up['create_s']:.1f} s, splits {up['split_s']:.1f} s, "
          f"backlog {up['backlog_s']:.1f} s")
    rows = []
    for r in runs:
        c = r["control"]
        rows.append([f"{r['shards']} ({r.get('puller', 'this checkout')})", r["all_resolved_s"], r["caught_up_s"], r["lag_p50_s"], r["lag_p95_s"],
                     r["lag_max_s"], r["steady_cores"], r["cpu_ms_per_1000_rows"], r["traffic_rows_per_s"],
                     max(r["rss_peak_mib_per_shard"]), max(r["threads_peak_per_shard"]),
                     c["watermark_rows"], c["watermarks"]["versions"], c["watermarks_read_ms"],
                     c["ddl"]["versions"], c["control_read_ms"], c["status_ms"],
                     ", ".join(f"{k} {v}" for k, v in r["pd_calls"].items())])
    print(markdown_table(
        ["shards", "all tables resolved s", "caught up s", "lag p50 s", "lag p95 s", "lag max s",
         "steady puller cores", "CPU ms / 1k rows", "traffic rows/s", "peak RSS MiB / shard", "threads / shard",
         "watermark rows", "watermark versions", "watermarks read ms", "ddl versions", "control read ms",
         "status ms", "PD calls"], rows))
    f = results["frontier"]
    print(f"\nfrontier: {f['us_per_region_resolved']:.1f} µs per region resolved ts (forward + frontier), "
          f"{f['ms_per_round_all_regions']:.0f} ms per round over {f['regions_in_tables']:,} regions")
    h = results.get("history")
    if h:
        print(f"\nwatermark history: {h['tables']} ids, {h['flushes']} flushes, median write "
              f"{h['write_ms_median']:.0f} ms\n")
        print(markdown_table(["flushes", "read ms", "versions", "checkpoints", "data files", "log MiB"],
                             [[p["flushes"], p["read_ms"], p["versions"], p.get("checkpoints", 0),
                               p.get("data_files", 0), p["log_mib"]] for p in h["points"]]))
    st = results.get("status")
    if st:
        print(f"\nstatus with {st['replicas']:,} replicas ({st['commits_per_replica']} merge commits each, built in "
              f"{st['build_s']:.0f} s): {st['status_ms']:.0f} ms from the merge log ({st['status_from_merge_log']:,} "
              f"tables; page {st['page_ms']:.0f} ms), {st['status_exact_ms']:.0f} ms exact; one replica's log read {st['replica_read_ms']:.2f} ms; "
              f"status = {st['status_in_replica_reads']:.0f} replica reads, exact = "
              f"{st['exact_in_replica_reads']:.0f}; with {st['merge_log_runs']} runs in the merge log "
              f"({st['merge_log_rows']:,} rows): status {st['status_ms_after_runs']:.0f} ms, page "
              f"{st['page_ms_after_runs']:.0f} ms + JSON {st['page_json_ms_after_runs']:.0f} ms "
              f"({st['page_json_bytes_after_runs'] / MIB:.1f} MiB) or HTML {st['page_render_ms_after_runs']:.0f} ms "
              f"({st['page_runs_shown']} runs shown; whole log "
              f"{st['merge_log_files']:,} files read in {st['merge_log_full_read_ms']:.0f} ms; written in "
              f"{st['merge_log_write_s']:.0f} s); maintenance {st['trim_s']:.1f} s ({st['trim_files_compacted']:,} "
              f"files compacted, {st['trim_rows_deleted']:,} rows deleted, {st['merge_log_files_after_trim']} left), "
              f"then status {st['status_ms_after_trim']:.0f} ms ({st['status_from_merge_log_after_trim']:,} from "
              f"the log), page {st['page_ms_after_trim']:.0f} ms")
    print(f"\nload average (1, 5, 15 min) at the end: {results['load_end']}")


def print_merge(m: dict, load: tuple[float, float, float]) -> None:
    print(f"\nmerge: {m['tables']} tables in {m['wall_s']:.0f} s ({m['tables_per_min']:.1f} tables/min, "
          f"{m['replicas_with_checkpoint']} replicas with a checkpoint); status with replicas "
          f"{m['status_ms_with_replicas']:.0f} ms; load average at the end {load}")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--regions", type=int, default=10_000)
    parser.add_argument("--stores", type=int, default=3)
    parser.add_argument("--partitioned-every", type=int, default=20, help="every Nth table hash-partitioned (0: none)")
    parser.add_argument("--backlog-rows", type=int, default=20, help="rows per table committed after T0")
    parser.add_argument("--light-rate", type=float, default=50.0, help="txn/s round-robin over all tables")
    parser.add_argument("--hot-tables", type=int, default=3)
    parser.add_argument("--hot-rate", type=float, default=50.0, help="txn/s over the hot tables")
    parser.add_argument("--ddl-interval", type=float, default=10.0, help="seconds between DDLs in steady state")
    parser.add_argument("--shards", default="1,4")
    parser.add_argument("--steady", type=float, default=60.0, help="seconds of steady state per shard count")
    parser.add_argument("--start-timeout", type=float, default=600.0)
    parser.add_argument("--sample-interval", type=float, default=1.0)
    parser.add_argument("--flush-interval", default="1s")
    parser.add_argument("--quota", default="256MiB")
    parser.add_argument("--history-flushes", type=int, default=0, help="0: skip the watermark history phase")
    parser.add_argument("--status-replicas", type=int, default=0, help="0: skip the status-with-replicas phase")
    parser.add_argument("--replica-commits", type=int, default=5, help="merge commits per replica of that phase")
    parser.add_argument("--merge-log-runs", type=int, default=100, help="merge runs in the merge log of that phase")
    parser.add_argument("--merge-log-interval", type=float, default=300.0,
                        help="seconds between those runs' finish times (default: the default merge schedule)")
    parser.add_argument("--merge-tables", type=int, default=0, help="0: skip the Spark merge phase")
    parser.add_argument("--compare-puller", help="a checkout (e.g. `git worktree add` of main) whose puller "
                        "also runs on the same upstream, interleaved with this one, for before/after CPU")
    parser.add_argument("--compare-rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    results: dict = {"load_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        up = Upstream(args)
        traffic = Traffic(up, args.light_rate, args.hot_tables, args.hot_rate, args.ddl_interval, args.seed)
        try:
            results["upstream"] = {
                "tables": args.tables, "physical_tables": len(up.physical_ids()), "stores": args.stores,
                "regions": len(up.cluster.regions.all()), "backlog_rows": up.backlog_rows,
                "create_s": up.create_s, "split_s": up.split_s, "backlog_s": up.backlog_s}
            traffic.start()
            results["runs"] = [puller_run(up, traffic, int(n), args, tmp) for n in args.shards.split(",")]
            if args.compare_puller:  # before/after on one upstream and load: other, this, other, this...
                shards = int(args.shards.split(",")[0])
                for round_ in range(args.compare_rounds):
                    results["runs"].append(puller_run(up, traffic, shards, args, tmp, Path(args.compare_puller),
                                                      f"_other{round_ + 1}"))
                    results["runs"].append(puller_run(up, traffic, shards, args, tmp, None, f"_this{round_ + 2}"))
            traffic.stop()
            if args.status_replicas:
                first = tmp / f"scale{args.shards.split(',')[0]}.toml"
                results["status"] = status_at_scale(first, args.status_replicas, args.replica_commits,
                                                    args.merge_log_runs, up.cluster.tso.next(),
                                                    args.merge_log_interval)
            results["traffic_errors"] = traffic.errors
            results["frontier"] = frontier_cost(up)
            merge_lake = merge_landed(up, args.merge_tables, tmp) if args.merge_tables else None
        finally:
            traffic.stop()
            up.close()
        if args.history_flushes:
            results["history"] = history_growth(args.tables, args.history_flushes, tmp)
        results["load_end"] = os.getloadavg()
        print_report(results)
        write_json(args.json, "scale", env, results)  # before the merge, which may wait long for the Spark lock
        if merge_lake is not None:
            results["merge"] = merge_run(merge_lake, [f"m{i:04d}" for i in range(args.merge_tables)])
            results["load_end_merge"] = os.getloadavg()
            print_merge(results["merge"], results["load_end_merge"])
            write_json(args.json, "scale", env, results)
    return results


if __name__ == "__main__":
    main()
