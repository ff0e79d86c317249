"""Resolved-ts lag and puller memory under a live simulated workload, and backpressure on a backlog.

Phase 1, lag: a 3-store SimCluster + SimTiDB run a seeded WorkloadRunner preset at --rate txn/s in
this process; `tidelake pull` runs as a child process (so its RSS is its own) with a changefeed on
the workload's database. Every --sample-interval s this process records, in seconds behind the
simulator's TSO now:
  table lag    now - resolved ts of the worst table, from the puller's progress lines
               (in memory: what the feed has resolved);
  durable lag  now - the lowest durable table watermark in the lake (read_watermarks): what a
               merge may advance to. It adds the flush interval and the Delta commit time.
p50/p95/max over the run (after --warmup s), and the puller's RSS.

Phase 2, memory under backpressure, once per --quotas memory quota (fresh lake each):
  backlog  --backlog-rows rows (valid row values of the workload's `orders` table, written straight
           into MVCC in 1000-row transactions) wait behind the changefeed's start ts; the puller
           catches up. Base RSS: when the feed came up (its first progress line).
  txn      a puller running and caught up on a table created for the case (CREATE TABLE LIKE
           orders, after the changefeed's start, so a merge creates its replica from that
           CREATE); then --txns consecutive transactions of --txn-rows rows, each prewritten
           (the puller holds every prewrite until the commit), held --txn-hold s and committed.
           Per transaction: land time (its last commit to the table's and the DDL's durable
           watermarks reaching its commit ts: every row in the changelog, mergeable) and, with --merge, merge time (run_merge of
           the table up to its commit ts, the writer run_merge chooses, in a local Spark session
           started first; with --merge-on-driver no Spark session, every window on the driver, as
           run_merge writes windows of up to DRIVER_WINDOW_MAX_ROWS rows anyway) with the replica's
           commits for it (1: the transaction in one version) and the replica's rows checked. Base
           RSS: the idle puller just before the first prewrite. The row data (key + value bytes of
           every row) and this process's RSS growth while the simulator holds the rows (per row:
           what the simulator needs to hold a transaction of that size) are reported too.
Each reports base and peak RSS, growth / quota and peak / (base + quota); if the quota holds, the
growth follows the quota (plus a constant: a flush's working memory, the region queues), not the rows.

    .venv/bin/python bench/bench_lag.py [--preset smoke] [--rate 100] [--duration 30]
        [--flush-interval 1s] [--quota 64MiB] [--backlog-rows 150000] [--txn-rows 0]
        [--quotas 8MiB,48MiB] [--txns 1] [--merge | --merge-on-driver] [--backlog-value-bytes 400] [--seed 0]
    --duration 0 skips the lag phase; --backlog-rows 0 / --txn-rows 0 skip those cases.
    --merge starts a local Spark session (run it under `flock /tmp/tidelake-spark.lock`).
    --backlog-value-bytes sets the JSON padding of every backlog and transaction row (its width).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (  # noqa: E402
    MIB,
    RssSampler,
    markdown_table,
    percentile,
    print_environment,
    rss_bytes,
    write_json,
)
from deltalake import DeltaTable  # noqa: E402

from tidelake import tso  # noqa: E402
from tidelake.codec.keys import record_key  # noqa: E402
from tidelake.config import parse_size  # noqa: E402
from tidelake.config_writer import changefeed_document, write_config  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.replica_catalog import ReplicaCatalog  # noqa: E402
from tidelake.lake.watermarks import read_watermarks  # noqa: E402
from tidelake.merge.merge_run import run_merge  # noqa: E402
from tidelake.merge.table_merge import DRIVER_WINDOW_MAX_ROWS  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.sim.workload import WorkloadRunner  # noqa: E402
from tidelake.spark.spark_session import get_session  # noqa: E402

DATABASE = "bench"
_PROGRESS = re.compile(r"pull \S+: (\d+) tables, (\d+) rows .*?(?:max lag ([\d.]+)s|no tables)")
BACKLOG_TXN_ROWS = 1000
# TiDB cuts a transaction's prewrites and commits into RPCs of <= 16 KiB key+value per region
# (tikv/client-go txnkv/transaction/2pc.go txnCommitBatchSize); TiKV sends each applied RPC as
# its own CDC event, so the big transaction reaches the puller in events of this size.
TXN_BATCH_BYTES = 16 * 1024


def _config(path: Path, pd: str, lake: Path, flush_interval: str, quota: str, start_ts: int | None) -> Path:
    # One changefeed id per lake (the config's name): PD registers each id to one lake
    # (docs/operations.md#moving-or-re-creating-a-lake), and the phases share one cluster.
    doc = changefeed_document(path.stem, [pd], lake, rules=[f"{DATABASE}.*"], start_ts=start_ts or None, gc_ttl="10m",
                              puller={"flush_interval": flush_interval, "memory_quota": quota})
    return write_config(path, doc)


class PullProcess:
    """`tidelake pull` as a child; its progress lines parsed on a thread."""

    def __init__(self, config: Path, progress_interval_s: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tidelake", "pull", "--config", str(config),
             "--progress-interval", str(progress_interval_s)],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.table_lag: list[tuple[float, float]] = []  # (monotonic, seconds)
        self.rows = 0
        self.first_progress = 0.0  # monotonic time of the first progress line: the feed is up
        self.tail: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.tail = (self.tail + [line.rstrip()])[-20:]
            found = _PROGRESS.search(line)
            if found:
                self.first_progress = self.first_progress or time.monotonic()
                self.rows = int(found.group(2))
                if found.group(3) is not None:
                    self.table_lag.append((time.monotonic(), float(found.group(3))))

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError("tidelake pull exited " + str(self.proc.returncode) + ":\n" + "\n".join(self.tail))

    def stop(self) -> None:
        self.proc.terminate()  # SIGTERM: graceful flush
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(5)


def _durable_lag(layout: LakeLayout, now_ts: int, tables: set[int]) -> float | None:
    marks = read_watermarks(layout).table_resolved
    landed = [marks[t] for t in tables if t in marks]
    if not landed or len(landed) < len(tables):
        return None
    return tso.lag_seconds(min(landed), now_ts)


def _physical_ids(tidb: SimTiDB) -> set[int]:
    return {pid for db, _, info in tidb.tables() if db == DATABASE for pid in info.physical_ids()}


def _stats(values: list[float]) -> list[float]:
    if not values:
        return [float("nan")] * 3
    return [percentile(values, 50), percentile(values, 95), max(values)]


def lag_phase(tmp: Path, preset: str, rate: float, duration: float, warmup: float, flush_interval: str,
              quota: str, sample_s: float, seed: int) -> dict:
    cluster = SimCluster(n_stores=3, seed=seed, gc_interval_s=0)
    with cluster:
        tidb = SimTiDB(cluster)
        workload = WorkloadRunner(tidb, preset, seed=seed, rate=rate, database=DATABASE)
        workload.run_ops(20)  # the preset's CREATE statements, before the changefeed starts
        lake = tmp / "lake-lag"
        config = _config(tmp / "lag.toml", cluster.pd_address, lake, flush_interval, quota, None)
        layout, tables = LakeLayout(str(lake)), _physical_ids(tidb)
        pull = PullProcess(config, sample_s)
        durable: list[tuple[float, float]] = []
        try:
            with RssSampler(pull.proc.pid, sample_s) as rss:
                while _durable_lag_safe(layout, cluster, tables) is None:  # first flush landed
                    pull.alive()
                    time.sleep(sample_s)
                workload.start()
                started = time.monotonic()
                while time.monotonic() - started < duration:
                    pull.alive()
                    lag = _durable_lag_safe(layout, cluster, tables)
                    if lag is not None:
                        durable.append((time.monotonic(), lag))
                    time.sleep(sample_s)
                workload.stop()
                counters = workload.counters.snapshot()
        finally:
            pull.stop()
    after = started + warmup
    table = [lag for t, lag in pull.table_lag if after <= t <= started + duration]
    durable_lags = [lag for t, lag in durable if t >= after]
    measured = duration - warmup
    result = {
        "preset": preset, "target_rate": rate, "txn_per_s": counters["txns"] / duration,
        "rows_per_s": counters["rows"] / duration, "measured_s": measured, "samples": len(table),
        "table_lag": _stats(table), "durable_lag": _stats(durable_lags),
        "rss_peak_mib": rss.peak / MIB, "rss_median_mib": percentile([b for _, b in rss.samples], 50) / MIB,
        "quota": quota, "flush_interval": flush_interval, "errors": counters["errors"],
    }
    print(f"\n## Lag under a live workload: preset {preset}, target {rate:g} txn/s "
          f"(achieved {result['txn_per_s']:.0f} txn/s, {result['rows_per_s']:.0f} rows/s), "
          f"{measured:.0f} s measured after {warmup:.0f} s warm-up, flush interval {flush_interval}, quota {quota}\n")
    print(markdown_table(
        ["lag of the worst table (s)", "p50", "p95", "max", "samples"],
        [["table resolved ts (in memory)", *result["table_lag"], len(table)],
         ["durable watermark (lake)", *result["durable_lag"], len(durable_lags)]]))
    print(f"\npuller RSS: median {result['rss_median_mib']:.0f} MiB, peak {result['rss_peak_mib']:.0f} MiB")
    return result


def _durable_lag_safe(layout: LakeLayout, cluster: SimCluster, tables: set[int]) -> float | None:
    try:
        return _durable_lag(layout, cluster.tso.current(), tables)
    except OSError:
        return None  # a Delta log file being written right now; sample again


def backpressure_phase(tmp: Path, backlog_rows: int, txn_rows: int, txn_hold_s: float, value_bytes: int,
                       quotas: list[str], flush_interval: str, seed: int, txns: int = 1, merge: bool = False,
                       spark=None) -> dict:
    cluster = SimCluster(n_stores=3, seed=seed, gc_interval_s=0)
    runs = []
    with cluster:
        tidb = SimTiDB(cluster)
        WorkloadRunner(tidb, "smoke", seed=seed, database=DATABASE).run_ops(20)
        _, info = tidb.resolve_table(DATABASE, "orders")
        value = _orders_value(cluster, tidb, info.id, value_bytes)
        start_ts = cluster.tso.next()
        backlog_bytes = _write_backlog(cluster, info.id, backlog_rows, value) if backlog_rows else 0
        for quota in quotas:
            if backlog_rows:
                runs.append(_catch_up(cluster, tmp, quota, start_ts, backlog_rows, flush_interval))
            if txn_rows:
                runs.append(_txns(cluster, tidb, tmp, quota, len(runs), txn_rows, txns, value, txn_hold_s,
                                  flush_interval, merge, spark))
    print(f"\n## Memory under backpressure: a backlog of {backlog_rows:,} rows "
          f"({backlog_bytes / MIB:.0f} MiB key+value) and {txns} transaction(s) of {txn_rows:,} rows, "
          f"{len(value)} B values, flush interval {flush_interval}\n")
    print(markdown_table(
        ["case", "memory quota", "s", "rows/s", "commits", "base RSS MiB", "peak RSS MiB", "growth MiB",
         "growth / quota"],
        [[r["case"], r["quota"], r["seconds"], r["rows_per_s"], r["changelog_commits"], r["rss_base_mib"],
          r["rss_peak_mib"], r["rss_growth_mib"], r["growth_per_quota"]] for r in runs]))
    _print_txns([r for r in runs if r["case"] == "txn"])
    fits = _fits(runs)
    for case, fit in fits.items():
        print(f"\n{case}: growth = {fit['slope']:.2f} x quota + {fit['intercept_mib']:.0f} MiB "
              f"(fit through the quotas {', '.join(fit['quotas'])})")
    return {"backlog_rows": backlog_rows, "backlog_mib": backlog_bytes / MIB, "txn_rows": txn_rows, "txns": txns,
            "value_bytes": len(value), "runs": runs, "fits": fits}


def _print_txns(runs: list[dict]) -> None:
    """Land and merge times of the transactions of each txn run, and its RSS against base + quota."""
    if not runs:
        return
    print()
    print(markdown_table(
        ["memory quota", "transactions", "rows each", "land s p50", "p95", "max", "merge s p50", "p95", "max",
         "replica commits per txn", "peak RSS / (base + quota)"],
        [[r["quota"], r["txns"], r["txn_rows"], *r["land_s"], *(r["merge_s"] or ["-"] * 3),
          ",".join(sorted({str(t.get("replica_commits", "-")) for t in r["transactions"]})),
          r["rss_peak_per_base_plus_quota"]] for r in runs]))
    for r in runs:
        print(f"\n{r['quota']}: row data {r['txn_row_bytes'] / MIB:,.1f} MiB per transaction "
              f"({r['txn_row_bytes'] / r['txn_rows']:.0f} B a row, key + value); puller RSS per row "
              f"{r['rss_growth_mib'] * MIB / r['txn_rows']:.1f} B of growth; the simulator's (this process's) "
              f"RSS grew {r['sim_rss_growth_mib']:.0f} MiB while holding the rows, "
              f"{r['sim_rss_per_row_b']:.0f} B per row")


def _run_result(case: str, quota: str, rows: int, seconds: float, base: int, peak: int, commits: int) -> dict:
    quota_mib = parse_size(quota) / MIB
    growth = (peak - base) / MIB
    return {"case": case, "quota": quota, "quota_mib": quota_mib, "rows": rows, "seconds": seconds,
            "rows_per_s": rows / seconds, "rss_base_mib": base / MIB, "rss_peak_mib": peak / MIB,
            "rss_growth_mib": growth, "growth_per_quota": growth / quota_mib, "changelog_commits": commits}


def _commits(lake: Path) -> int:
    """Changelog commits of the run (its flushes with rows): a Delta write's native memory and
    delta-rs's I/O threads grow with their count, not only with the rows."""
    return DeltaTable(LakeLayout(str(lake)).changelog).version()


def _fits(runs: list[dict]) -> dict:
    """Per case, the line growth = slope x quota + intercept through its lowest and highest quota."""
    fits = {}
    for case in sorted({r["case"] for r in runs}):
        mine = sorted((r for r in runs if r["case"] == case), key=lambda r: r["quota_mib"])
        lo, hi = mine[0], mine[-1]
        if hi["quota_mib"] == lo["quota_mib"]:
            continue
        slope = (hi["rss_growth_mib"] - lo["rss_growth_mib"]) / (hi["quota_mib"] - lo["quota_mib"])
        fits[case] = {"slope": slope, "intercept_mib": lo["rss_growth_mib"] - slope * lo["quota_mib"],
                      "quotas": [lo["quota"], hi["quota"]]}
    return fits


def _wait_rows(pull: PullProcess, rows: int, started: float, what: str) -> None:
    while pull.rows < rows:
        pull.alive()
        if time.monotonic() - started > 1800:
            raise TimeoutError(f"{what} stuck at {pull.rows}/{rows} rows")
        time.sleep(0.1)


def _catch_up(cluster: SimCluster, tmp: Path, quota: str, start_ts: int, rows: int, flush_interval: str) -> dict:
    lake = tmp / f"lake-backlog-{quota}"
    config = _config(tmp / f"backlog-{quota}.toml", cluster.pd_address, lake, flush_interval, quota, start_ts)
    pull = PullProcess(config, 0.5)
    started = time.monotonic()
    try:
        with RssSampler(pull.proc.pid, 0.05) as rss:
            _wait_rows(pull, rows, started, "catch-up")
            seconds = time.monotonic() - started
    finally:
        pull.stop()
    # RSS when the feed came up (imports, schema, lander open): what the quota adds to
    base = next((b for t, b in rss.samples if t >= pull.first_progress), rss.first)
    return _run_result("backlog", quota, rows, seconds, base, rss.peak, _commits(lake))


def _txns(cluster: SimCluster, tidb: SimTiDB, tmp: Path, quota: str, case: int, rows: int, count: int,
          value: bytes, hold_s: float, flush_interval: str, merge: bool = False, spark=None) -> dict:
    """`count` consecutive transactions of `rows` rows into a table created for this case."""
    name = f"txns{case}"
    lake = tmp / f"lake-txn-{quota}-{case}"
    config = _config(tmp / f"txn-{quota}-{case}.toml", cluster.pd_address, lake, flush_interval, quota,
                     cluster.tso.next())
    pull = PullProcess(config, 0.5)
    layout = LakeLayout(str(lake))
    txns, merge_warmup_s = [], None
    try:
        while not read_watermarks(layout).table_resolved:  # subscribed and resolved
            pull.alive()
            time.sleep(0.2)
        tidb.create_table_like(DATABASE, name, DATABASE, "orders")
        _, info = tidb.resolve_table(DATABASE, name)
        created = cluster.tso.next()
        _wait_landed(pull, layout, info.id, created)
        if merge:  # the replica's CREATE (and the session's first merge), not measured
            merge_warmup_s = _merge(spark, layout, name, created)[0]
        time.sleep(2.0)  # settle: the idle puller's RSS is the base
        sim_before = rss_bytes()
        with RssSampler(pull.proc.pid, 0.05) as rss:
            base = rss.first
            started = time.monotonic()
            prewritten = base
            for n in range(count):
                one = _one_txn(cluster, info.id, 1 + n * rows, rows, value, hold_s)
                held = one.pop("held")
                prewritten = max(prewritten, *(b for t, b in rss.samples if t <= held))
                _wait_landed(pull, layout, info.id, one["commit_ts"], rows)
                one["land_s"] = time.monotonic() - one.pop("committed")
                if merge:
                    one["merge_s"], one["replica_commits"] = _merge(spark, layout, name, one["commit_ts"],
                                                                    (n + 1) * rows)
                txns.append(one)
            seconds = time.monotonic() - started
            sim_growth = rss_bytes() - sim_before
    finally:
        pull.stop()
    result = _run_result("txn", quota, rows * count, seconds, base, rss.peak, _commits(lake))
    result["txn_row_bytes"] = rows * (len(record_key(info.id, 1)) + len(value))
    result["sim_rss_growth_mib"] = sim_growth / MIB
    result["sim_rss_per_row_b"] = sim_growth / (rows * count)
    result["rss_peak_before_commit_mib"] = prewritten / MIB  # while only prewrites were waiting
    result["rss_peak_per_base_plus_quota"] = rss.peak / (base + parse_size(quota))
    result.update(txns=count, txn_rows=rows, transactions=txns, land_s=_stats([t["land_s"] for t in txns]),
                  merge_s=_stats([t["merge_s"] for t in txns]) if merge else None,
                  replica_commits_max=max(t["replica_commits"] for t in txns) if merge else None,
                  merge_warmup_s=merge_warmup_s)
    return result


def _one_txn(cluster: SimCluster, table_id: int, first_handle: int, rows: int, value: bytes, hold_s: float) -> dict:
    """Prewrite `rows` rows in TiDB-sized batches, hold them `hold_s`, commit; its commit ts and the
    monotonic times its hold ended and its last commit batch was applied."""
    keys = [record_key(table_id, first_handle + h) for h in range(rows)]
    per_rpc = max(1, TXN_BATCH_BYTES // (len(keys[0]) + len(value)))
    batches = [keys[i:i + per_rpc] for i in range(0, rows, per_rpc)]
    began = time.monotonic()
    start_ts = cluster.tso.next()
    for batch in batches:  # one prewrite RPC per batch, as TiDB sends them
        cluster.mvcc.prewrite([("put", k, value) for k in batch], keys[0], start_ts, 3_600_000)
    time.sleep(hold_s)  # every prewrite reaches the puller and waits there for the commit
    held = time.monotonic()
    commit_ts = cluster.tso.next()
    for batch in batches:  # the primary's batch first, then the secondaries
        cluster.mvcc.commit(batch, start_ts, commit_ts)
    committed = time.monotonic()
    return {"rows": rows, "commit_ts": commit_ts, "write_s": committed - began, "held": held, "committed": committed}


def _wait_landed(pull: PullProcess, layout: LakeLayout, table_id: int, ts: int, rows: int = 0) -> None:
    """Until the table's and the DDL's durable watermarks reach `ts`: every row committed at or
    before it landed, and a merge may advance the replica to it (given 30 min, or 1 s per 1,000
    rows of a larger transaction)."""
    started = time.monotonic()
    while not _landed(read_watermarks(layout), table_id, ts):
        pull.alive()
        if time.monotonic() - started > max(1800, rows / 1000):
            raise TimeoutError(f"table {table_id} not landed up to {ts}")
        time.sleep(0.02)


def _landed(marks, table_id: int, ts: int) -> bool:
    return marks.table_resolved.get(table_id, 0) >= ts and marks.ddl_resolved >= ts


def _merge(spark, layout: LakeLayout, name: str, until_ts: int, replica_rows: int | None = None) -> tuple[float, int]:
    """(seconds, replica commits) of a merge of the table up to `until_ts`; checks the replica reached
    it holding `replica_rows` rows (their count from the Delta log's file stats)."""
    catalog = ReplicaCatalog(layout)
    entry = catalog.find(DATABASE, name)
    before = DeltaTable(entry.path).version() if entry is not None else -1
    started = time.monotonic()
    (table,) = run_merge(spark, layout, tables=[f"{DATABASE}.{name}"], until_ts=until_ts, write_log=False).tables
    seconds = time.monotonic() - started
    if table.checkpoint_after != until_ts:
        raise RuntimeError(f"merge of {name} stopped at {table.checkpoint_after}, not {until_ts}: {table.reason}")
    replica = DeltaTable(catalog.find(DATABASE, name).path)
    if replica_rows is not None:
        held = sum(replica.get_add_actions(flatten=True).column("num_records").to_pylist())
        if held != replica_rows:
            raise RuntimeError(f"replica of {name} holds {held} rows after the merge to {until_ts}, not {replica_rows}")
    return seconds, replica.version() - before


def _orders_value(cluster: SimCluster, tidb: SimTiDB, table_id: int, value_bytes: int) -> bytes:
    """One valid `orders` row value (the puller never decodes values) with `value_bytes` of JSON padding."""
    with tidb.txn() as txn:
        handle = txn.insert(DATABASE, "orders", {"id": 10**9, "customer": 1, "amount": 1, "status": "new",
                                                 "note": "backlog template", "payload": {"pad": "x" * value_bytes}})
    return cluster.mvcc.get(record_key(table_id, handle), cluster.tso.next())


def _write_backlog(cluster: SimCluster, table_id: int, rows: int, value: bytes) -> int:
    """`rows` rows of `value`, 1000 per txn; returns their key+value bytes."""
    total = 0
    for first in range(0, rows, BACKLOG_TXN_ROWS):
        keys = [record_key(table_id, 2 * 10**9 + h) for h in range(first, min(first + BACKLOG_TXN_ROWS, rows))]
        start_ts = cluster.tso.next()
        cluster.mvcc.prewrite([("put", k, value) for k in keys], keys[0], start_ts, 10_000)
        cluster.mvcc.commit(keys, start_ts, cluster.tso.next())
        total += sum(len(k) + len(value) for k in keys)
    return total


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--rate", type=float, default=100.0, help="target txn/s of the workload")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of workload in the lag phase")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds at the start not counted")
    parser.add_argument("--sample-interval", type=float, default=0.25)
    parser.add_argument("--flush-interval", default="1s")
    parser.add_argument("--quota", default="64MiB", help="puller memory quota in the lag phase")
    parser.add_argument("--backlog-rows", type=int, default=150_000, help="0: skip the backpressure phase")
    parser.add_argument("--backlog-value-bytes", type=int, default=400,
                        help="JSON padding per backlog and transaction row: the rows' width")
    parser.add_argument("--txn-rows", type=int, default=0, help="rows of the one big transaction; 0: skip it")
    parser.add_argument("--txn-hold", type=float, default=5.0, help="seconds each transaction stays prewritten")
    parser.add_argument("--txns", type=int, default=1, help="consecutive transactions of --txn-rows rows")
    merging = parser.add_mutually_exclusive_group()
    merging.add_argument("--merge", action="store_true",
                         help="merge the replica after each transaction lands (a local Spark session)")
    merging.add_argument("--merge-on-driver", action="store_true",
                         help="the same with no Spark session: every window by delta-rs on the driver "
                              f"(transactions of at most {DRIVER_WINDOW_MAX_ROWS:,} rows)")
    parser.add_argument("--quotas", default="8MiB,48MiB", help="memory quotas of the backpressure phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.txns < 1:
        parser.error("--txns must be at least 1")
    if args.merge_on_driver and args.txn_rows > DRIVER_WINDOW_MAX_ROWS:
        parser.error(f"--merge-on-driver merges windows of at most {DRIVER_WINDOW_MAX_ROWS:,} rows, "
                     f"--txn-rows is {args.txn_rows:,}: use --merge")
    env = print_environment()
    # Spark first: launching its JVM forks, and forking while the simulator's gRPC threads run is unsafe.
    spark = get_session("bench-lag", master="local[2]") if args.merge and args.txn_rows else None
    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp:
        results = {}
        if args.duration > 0:
            results["lag"] = lag_phase(Path(tmp), args.preset, args.rate, args.duration, args.warmup,
                                       args.flush_interval, args.quota, args.sample_interval, args.seed)
        if args.backlog_rows or args.txn_rows:
            results["backpressure"] = backpressure_phase(
                Path(tmp), args.backlog_rows, args.txn_rows, args.txn_hold, args.backlog_value_bytes,
                args.quotas.split(","), args.flush_interval, args.seed, args.txns,
                args.merge or args.merge_on_driver, spark)
    if spark is not None:
        spark.stop()
    write_json(args.json, "lag", env, results)
    return results


if __name__ == "__main__":
    main()
