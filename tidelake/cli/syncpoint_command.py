"""`tidelake syncpoint (--config FILE | --lake PATH) [--interval S]`: one cross-table cut.

Merges every replica to the next reachable aligned TSO S and records the cut there
(tidelake.syncpoint.cut.run_syncpoint); the interval comes from the changefeed's
[merge].syncpoint_interval unless --interval is given. Exit 0 when a syncpoint was recorded or
none is due yet (the reason is printed), 75 when another writer held a replica of the cut (one
line names it; the next interval takes the cut), 1 when the cut could not be taken. The merge DAG runs
this through spark_jobs/syncpoint.py. Owner: `tidelake syncpoint`.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.cli.spark_choice import add_spark_arguments, remote_choice
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.spark.spark_session import get_session, release_session
from tidelake.syncpoint.cut import SyncpointOutcome, run_syncpoint


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("syncpoint", help="merge every replica to one aligned TSO and record the cut")
    add_target_arguments(parser)
    parser.add_argument("--interval", type=int, metavar="S", help="seconds between syncpoints (overrides the config)")
    add_spark_arguments(parser)
    parser.set_defaults(handler=_syncpoint)


def _syncpoint(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    interval = args.interval
    if interval is None and target.config is not None:
        interval = target.config.merge.syncpoint_interval_s
    if interval is None or interval < 1:
        raise InputError("no syncpoint interval: pass --interval S (seconds >= 1) or set "
                         "[merge].syncpoint_interval in the changefeed config")
    spark = get_session("tidelake-syncpoint", master=args.master, remote=remote_choice(args, target), lake=target.layout)
    try:
        result = run_syncpoint(spark, target.layout, interval)
    finally:
        release_session(spark)
    if result.outcome is SyncpointOutcome.RECORDED:
        cut = result.syncpoint
        print(f"syncpoint {result.ts}: {len(cut.replicas)} replicas"
              + (f", left out: {cut.excluded}" if cut.excluded else ""))
        return 0
    if result.outcome is SyncpointOutcome.INCOMPLETE:
        print(f"tidelake syncpoint: cut {result.ts} not taken: {result.reason}", file=sys.stderr)
        return 1
    if result.outcome is SyncpointOutcome.HELD:
        print(f"tidelake syncpoint: cut {result.ts} not taken now: {result.reason}", file=sys.stderr)
        return EXIT_TRY_LATER
    print(f"no syncpoint this time ({result.outcome}): {result.reason}")
    return 0
