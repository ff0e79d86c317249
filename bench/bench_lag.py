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

Phase 2, backpressure: a backlog of --backlog-rows rows (valid row values of the workload's
`orders` table, written straight into MVCC in 1000-row transactions) waits behind the changefeed's
start ts; then the puller catches up once per --quotas memory quota (fresh lake each). If the
quota holds, the puller's peak RSS grows with the quota, not with the backlog.

    .venv/bin/python bench/bench_lag.py [--preset smoke] [--rate 100] [--duration 30]
        [--flush-interval 1s] [--quota 64MiB] [--backlog-rows 150000] [--quotas 8MiB,48MiB] [--seed 0]
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
    write_json,
)
from tidelake import tso  # noqa: E402
from tidelake.codec.keys import record_key  # noqa: E402
from tidelake.config import parse_size  # noqa: E402
from tidelake.config_writer import changefeed_document, write_config  # noqa: E402
from tidelake.lake.layout import LakeLayout  # noqa: E402
from tidelake.lake.watermarks import read_watermarks  # noqa: E402
from tidelake.sim.cluster import SimCluster  # noqa: E402
from tidelake.sim.tidb.session import SimTiDB  # noqa: E402
from tidelake.sim.workload import WorkloadRunner  # noqa: E402

DATABASE = "bench"
_PROGRESS = re.compile(r"pull \S+: (\d+) tables, (\d+) rows .*?(?:max lag ([\d.]+)s|no tables)")
BACKLOG_TXN_ROWS = 1000


def _config(path: Path, pd: str, lake: Path, flush_interval: str, quota: str, start_ts: int | None) -> Path:
    doc = changefeed_document("bench", [pd], lake, rules=[f"{DATABASE}.*"], start_ts=start_ts or None, gc_ttl="10m",
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


def backpressure_phase(tmp: Path, backlog_rows: int, value_bytes: int, quotas: list[str], flush_interval: str,
                       seed: int) -> dict:
    cluster = SimCluster(n_stores=3, seed=seed, gc_interval_s=0)
    runs = []
    with cluster:
        tidb = SimTiDB(cluster)
        WorkloadRunner(tidb, "smoke", seed=seed, database=DATABASE).run_ops(20)
        _, info = tidb.resolve_table(DATABASE, "orders")
        start_ts = cluster.tso.next()
        backlog_bytes = _write_backlog(cluster, tidb, info.id, backlog_rows, value_bytes)
        for quota in quotas:
            lake = tmp / f"lake-bp-{quota}"
            config = _config(tmp / f"bp-{quota}.toml", cluster.pd_address, lake, flush_interval, quota, start_ts)
            pull = PullProcess(config, 0.5)
            started = time.monotonic()
            try:
                with RssSampler(pull.proc.pid, 0.05) as rss:
                    while pull.rows < backlog_rows:
                        pull.alive()
                        if time.monotonic() - started > 900:
                            raise TimeoutError(f"catch-up stuck at {pull.rows}/{backlog_rows} rows")
                        time.sleep(0.1)
                    seconds = time.monotonic() - started
            finally:
                pull.stop()
            # RSS when the feed came up (imports, schema, lander open): what the quota adds to
            idle = next((b for t, b in rss.samples if t >= pull.first_progress), rss.first)
            runs.append({"quota": quota, "quota_mib": parse_size(quota) / MIB, "seconds": seconds,
                         "rows_per_s": backlog_rows / seconds, "rss_start_mib": idle / MIB,
                         "rss_peak_mib": rss.peak / MIB, "rss_growth_mib": (rss.peak - idle) / MIB})
    print(f"\n## Backpressure: catching up a backlog of {backlog_rows:,} rows "
          f"({backlog_bytes / MIB:.0f} MiB key+value), flush interval {flush_interval}\n")
    print(markdown_table(
        ["memory quota", "catch-up s", "rows/s", "RSS when the feed started MiB", "peak RSS MiB", "growth MiB", "growth / quota"],
        [[r["quota"], r["seconds"], r["rows_per_s"], r["rss_start_mib"], r["rss_peak_mib"], r["rss_growth_mib"],
          r["rss_growth_mib"] / r["quota_mib"]] for r in runs]))
    return {"backlog_rows": backlog_rows, "backlog_mib": backlog_bytes / MIB, "runs": runs}


def _write_backlog(cluster: SimCluster, tidb: SimTiDB, table_id: int, rows: int, value_bytes: int) -> int:
    """Rows with one valid `orders` row value (the puller never decodes values), 1000 per txn."""
    with tidb.txn() as txn:
        handle = txn.insert(DATABASE, "orders", {"id": 10**9, "customer": 1, "amount": 1, "status": "new",
                                                 "note": "backlog template", "payload": {"pad": "x" * value_bytes}})
    value = cluster.mvcc.get(record_key(table_id, handle), cluster.tso.next())
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
    parser.add_argument("--backlog-value-bytes", type=int, default=400, help="JSON padding per backlog row")
    parser.add_argument("--quotas", default="8MiB,48MiB", help="memory quotas of the backpressure phase")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the results as JSON here")
    args = parser.parse_args(argv)
    env = print_environment()
    with tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp:
        results = {"lag": lag_phase(Path(tmp), args.preset, args.rate, args.duration, args.warmup,
                                    args.flush_interval, args.quota, args.sample_interval, args.seed)}
        if args.backlog_rows:
            results["backpressure"] = backpressure_phase(
                Path(tmp), args.backlog_rows, args.backlog_value_bytes, args.quotas.split(","), args.flush_interval,
                args.seed)
    write_json(args.json, "lag", env, results)
    return results


if __name__ == "__main__":
    main()
