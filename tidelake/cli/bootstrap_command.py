"""`tidelake bootstrap --config FILE [--at-ts TS] [--table DB.TABLE ...]`: initial snapshot.

Writes a replica of each selected table as of one TSO and hands it off to the changefeed so
the puller continues exactly after it. Safe to rerun after a crash.
Owner: `tidelake bootstrap` (the work: tidelake.bootstrap.bootstrap_run).
"""

from __future__ import annotations

import argparse
import math

from tidelake import tso
from tidelake.bootstrap.bootstrap_run import Bootstrap, BootstrapOptions
from tidelake.cli.upstream_connection import with_connection
from tidelake.config import load_config
from tidelake.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bootstrap",
        help="write replicas of tables as of one TSO and start the changefeed right after it",
        description="Snapshot the selected tables at one TSO into their replicas (checkpoint = that TSO) "
        "and hand off to the changefeed; a table the running changefeed does not feed yet joins it.",
    )
    add_bootstrap_arguments(parser)
    parser.set_defaults(handler=_bootstrap)


def add_bootstrap_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by the CLI and the spark-submit entry (spark_jobs/bootstrap_job.py)."""
    parser.add_argument("--config", required=True, help="changefeed TOML file")
    parser.add_argument("--at-ts", type=int, help="snapshot TSO (default: PD's current TSO)")
    parser.add_argument("--table", action="append", default=[], metavar="DB.TABLE",
                        help="only this table (repeatable); may name a table outside the changefeed's filter "
                        "to add it to the running changefeed")
    parser.add_argument("--spark-threshold-regions", type=int, default=4,
                        help="read tables with at least this many regions in Spark, one task per region (default 4)")
    parser.add_argument("--spark-master", help="Spark master for the read (default local[*])")
    parser.add_argument("--join-timeout", type=float, default=120.0,
                        help="seconds to wait for the puller to add a new table (default 120)")


def options_from_args(args: argparse.Namespace):
    """Validated BootstrapOptions from the parsed arguments."""
    if args.at_ts is not None and not 0 < args.at_ts < tso.LIMIT:
        raise InputError(f"--at-ts must be a positive TSO below 2^64, got {args.at_ts}")
    if not (math.isfinite(args.join_timeout) and args.join_timeout > 0):
        raise InputError(f"--join-timeout must be a finite number above zero, got {args.join_timeout}")
    if args.spark_threshold_regions < 1:
        raise InputError(f"--spark-threshold-regions must be at least 1, got {args.spark_threshold_regions}")
    return BootstrapOptions(
        at_ts=args.at_ts, tables=tuple(args.table), spark_threshold_regions=args.spark_threshold_regions,
        spark_master=args.spark_master, join_timeout_s=args.join_timeout,
    )


def run_and_report(args: argparse.Namespace, spark=None) -> int:
    bootstrap = Bootstrap(with_connection(load_config(args.config)), options_from_args(args), spark=spark)
    results = bootstrap.run()
    written = [r for r in results if r.how != "skipped"]
    bootstrap.say(f"done: {len(written)} replicas written, {len(results) - len(written)} already there")
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    return run_and_report(args)
