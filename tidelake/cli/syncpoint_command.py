"""`tidelake syncpoint (--config FILE | --lake PATH) [--interval S]`: one cross-table cut.

Merges every replica to the next reachable aligned TSO S and records the cut there
(tidelake.syncpoint.cut.run_syncpoint); the interval comes from [merge].syncpoint_interval
unless --interval is given. Exit 0 when a syncpoint was recorded or none is due yet (the reason
is printed), 75 when another writer held a replica of the cut or the store had no room (one
line names it; the next interval takes the cut), 1 when the cut could not be taken. With
[iceberg].enabled it then publishes the syncpoints not yet published to the Iceberg catalog
(`tidelake iceberg sync`; a refused replica is a line on stderr, an unreachable catalog exit 75).
The merge DAG runs this through spark_jobs/syncpoint_job.py. Owner: `tidelake syncpoint`.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.cli.spark_choice import add_spark_arguments, remote_choice
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.sync import sync_iceberg
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
    elif result.outcome in (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.NO_ROOM):
        print(f"tidelake syncpoint: cut {result.ts} not taken: {result.reason}", file=sys.stderr)
    elif result.outcome is SyncpointOutcome.HELD:
        print(f"tidelake syncpoint: cut {result.ts} not taken now: {result.reason}", file=sys.stderr)
    else:
        print(f"no syncpoint this time ({result.outcome}): {result.reason}")
    if target.config is not None and target.config.iceberg.enabled:  # after the Delta cut, as the job does
        iceberg = sync_iceberg(open_catalog(target.layout, target.config.iceberg), target.layout,
                               on_publish=lambda p: print(p.line(), flush=True))
        for line in iceberg.refused.values():
            print(f"tidelake syncpoint: {line}", file=sys.stderr)
    exits = {SyncpointOutcome.INCOMPLETE: 1, SyncpointOutcome.HELD: EXIT_TRY_LATER,
             SyncpointOutcome.NO_ROOM: EXIT_TRY_LATER}
    return exits.get(result.outcome, 0)
