"""`tidelake pull --config FILE [--shard I/N] [--max-run-seconds S]`: run one puller shard.

It runs until SIGTERM/SIGINT or the run-length limit, then flushes what it pulled and exits 0,
so a scheduler (Airflow @continuous) can stop it at any time and start it again: the next run
resumes from the durable watermarks.
Owner: `tidelake pull` (the work: tidelake.capture.changefeed.puller_runner).
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading

from tidelake.capture.changefeed.process_memory import tune_allocators, warn_jemalloc_too_late
from tidelake.cli.upstream_connection import with_connection
from tidelake.config import load_config
from tidelake.errors import InputError
from tidelake.failpoints import check_env_names

log = logging.getLogger(__name__)

def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pull",
        help="pull committed changes of the selected tables from TiKV into the lake",
        description="Run the puller of a changefeed (or one shard of it) until stopped.",
    )
    parser.add_argument("--config", required=True, help="changefeed TOML file")
    parser.add_argument("--shard", help="I/N: run shard I of the N in [puller].shards (default 0/1)")
    parser.add_argument("--max-run-seconds", type=float, help="flush and exit 0 after this many seconds")
    parser.add_argument("--progress-interval", type=float, default=10.0, help="seconds between progress lines")
    parser.add_argument("--metrics-port", type=int,
                        help="serve Prometheus metrics on this TCP port (default: [puller].metrics_port plus the "
                             "shard index; no endpoint if neither is set)")
    parser.add_argument("--verbose", action="store_true", help="log region and DDL events (INFO)")
    parser.set_defaults(handler=_pull)


def _pull(args: argparse.Namespace) -> int:
    # A stop that arrives while the heavy imports below run is kept and handed to the runner; the
    # caller's handlers come back afterwards (tests call main() in-process).
    early_stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: early_stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run_puller(args, early_stop)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_puller(args: argparse.Namespace, early_stop: threading.Event) -> int:
    too_late = tune_allocators()
    # only now: jemalloc reads its settings when deltalake is first imported (process_memory)
    from tidelake.capture.changefeed.puller_runner import PullerRunner, RunOptions, Shard
    from tidelake.capture.landing.lander import LANDER_FAILPOINTS
    from tidelake.lake.lake_check import check_lake_root
    from tidelake.lake.layout import LakeLayout

    for name in ("max_run_seconds", "progress_interval"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise InputError(f"--{name.replace('_', '-')} must be a finite number above zero, got {value}")
    if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
        raise InputError(f"--metrics-port must be a TCP port 0-65535, got {args.metrics_port}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("tidelake.capture.changefeed.puller_runner").setLevel(logging.INFO)
    check_env_names(LANDER_FAILPOINTS, "tidelake pull")
    if too_late:
        warn_jemalloc_too_late("`tidelake pull`")
    config = with_connection(load_config(args.config))
    check_lake_root(LakeLayout.from_config(config.lake))
    if args.shard is not None:
        shard = Shard.parse(args.shard)
    elif config.puller.shards == 1:
        shard = Shard()
    else:
        raise InputError(f"{config.source} splits the tables into {config.puller.shards} shards: pass --shard I/N")
    runner = PullerRunner(
        config,
        shard,
        RunOptions(max_run_s=args.max_run_seconds, progress_interval_s=args.progress_interval,
                   metrics_port=config.puller.metrics_port_of(shard.index) if args.metrics_port is None
                   else args.metrics_port, watch_rss=True),
        progress=lambda p: print(_progress_line(runner.feed_id, p), file=sys.stderr, flush=True),
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: runner.stop())
    if early_stop.is_set():
        runner.stop()
    summary = runner.run()
    print(
        f"pull {runner.feed_id}: stopped; {summary.rows} rows ({summary.bytes / 2**20:.1f} MiB) and "
        f"{summary.jobs} DDL jobs this run, "
        f"{len(summary.table_resolved)} table watermarks, DDL resolved ts {summary.ddl_resolved}"
        + (f"; left: {summary.left}" if summary.left else ""),
        file=sys.stderr,
    )
    return 0


def _progress_line(feed_id: str, p) -> str:
    worst = max(p.table_lag_s.items(), key=lambda kv: kv[1], default=None)
    lag = f"max lag {worst[1]:.1f}s (table {worst[0]})" if worst else "no tables"
    return (
        f"pull {feed_id}: {p.tables} tables, {p.rows} rows ({p.rows_per_s:.0f}/s), "
        f"{p.bytes / 2**20:.1f} MiB ({p.mib_per_s:.2f} MiB/s), {lag}, "
        f"DDL lag {p.ddl_lag_s:.1f}s, buffer {p.buffered_bytes / 2**20:.1f} MiB"
        + (f", LANDING PAUSED: {p.landing_paused}" if p.landing_paused else "")
    )
