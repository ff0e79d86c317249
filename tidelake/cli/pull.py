"""`tidelake pull --config FILE [--shard I/N] [--max-run-seconds S]`: run one puller shard.

It runs until SIGTERM/SIGINT or the run-length limit, then flushes what it pulled and exits 0,
so a scheduler (Airflow @continuous) can stop it at any time and start it again: the next run
resumes from the durable watermarks.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import math
import os
import signal
import sys
import threading

from tidelake.errors import InputError

log = logging.getLogger(__name__)

# delta-rs allocates with its own jemalloc, which keeps freed pages for 10 s by default: under a
# backlog the puller's RSS then holds every recent flush's working memory (~20 MiB more, bench/
# README.md "Memory under backpressure"). jemalloc reads this once, when delta-rs first allocates
# (at its import), so the puller sets it before importing deltalake; a value the user set wins.
# Only here: it would change every process that imports tidelake (Airflow's DAG parsing, polars).
JEMALLOC_ENV = "_RJEM_MALLOC_CONF"
JEMALLOC_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"

# glibc malloc gives each thread that allocates an arena of its own, up to 8 per core, and each
# arena keeps its freed memory: the puller's gRPC, region-worker and delta-rs I/O threads (dozens
# while catching up) then held ~20-35 MiB more RSS than with two arenas, at the same speed (bench/
# README.md "Memory under backpressure"). glibc sizes its arena limit when a thread first needs a
# new arena, so the puller sets it (mallopt M_ARENA_MAX) before its threads start; a
# MALLOC_ARENA_MAX the user set wins. Only here, for the same reason as the jemalloc setting.
GLIBC_ARENAS_ENV = "MALLOC_ARENA_MAX"
GLIBC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc <malloc.h>

# pyarrow allocates with mimalloc by default, which kept each flush's freed Arrow buffers resident
# (20-30 MiB at a 64 MiB quota) where neither glibc nor delta-rs's jemalloc could reuse them. From
# the system allocator they are glibc's free memory, which the lander gives back after each flush
# (tidelake/lake/resident_memory.py; bench/README.md "Memory under backpressure"). An
# ARROW_DEFAULT_MEMORY_POOL the user set wins. Only here, for the same reason as the jemalloc setting.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


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


def limit_malloc_arenas(arenas: int = GLIBC_ARENAS) -> bool:
    """mallopt(M_ARENA_MAX, arenas) unless MALLOC_ARENA_MAX is set; False where there is no glibc
    mallopt (musl, macOS) or it refused."""
    if os.environ.get(GLIBC_ARENAS_ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(_M_ARENA_MAX, arenas) == 1


def arrow_on_system_malloc() -> bool:
    """Make pyarrow's default memory pool the system allocator's unless ARROW_DEFAULT_MEMORY_POOL
    is set; False when it was left alone."""
    if os.environ.get(ARROW_POOL_ENV):
        return False
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return True


def _run_puller(args: argparse.Namespace, early_stop: threading.Event) -> int:
    too_late = "deltalake" in sys.modules
    os.environ.setdefault(JEMALLOC_ENV, JEMALLOC_CONF)
    limit_malloc_arenas()
    arrow_on_system_malloc()
    from tidelake.capture.changefeed.runner import PullerRunner, RunOptions, Shard
    from tidelake.config import load_config
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
    logging.getLogger("tidelake.capture.changefeed.runner").setLevel(logging.INFO)
    if too_late:
        log.warning("deltalake was imported before `tidelake pull` set %s=%s: delta-rs keeps freed memory "
                    "10 s longer (more RSS under a backlog)", JEMALLOC_ENV, JEMALLOC_CONF)
    config = load_config(args.config)
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
        f"pull {runner.feed_id}: stopped; {summary.rows} rows and {summary.jobs} DDL jobs this run, "
        f"{len(summary.table_resolved)} table watermarks, DDL resolved ts {summary.ddl_resolved}"
        + (f"; left: {summary.left}" if summary.left else ""),
        file=sys.stderr,
    )
    return 0


def _progress_line(feed_id: str, p) -> str:
    worst = max(p.table_lag_s.items(), key=lambda kv: kv[1], default=None)
    lag = f"max lag {worst[1]:.1f}s (table {worst[0]})" if worst else "no tables"
    return (
        f"pull {feed_id}: {p.tables} tables, {p.rows} rows ({p.rows_per_s:.0f}/s), {lag}, "
        f"DDL lag {p.ddl_lag_s:.1f}s, buffer {p.buffered_bytes / 2**20:.1f} MiB"
    )
