"""spark-submit entry point of a syncpoint: `spark-submit spark_jobs/syncpoint.py (--config FILE |
--lake PATH --interval S)`. Merges every replica to the next reachable aligned TSO and records the
cross-table cut there (tidelake.spark.syncpoint_job.run_syncpoint); the interval comes from the
changefeed's [merge].syncpoint_interval unless --interval is given. Exit 0 when a syncpoint was
recorded or none is due yet (the reason is printed), 1 when the cut could not be taken.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.errors import InputError, TidelakeError


def main(argv: list[str] | None = None) -> int:
    from tidelake.lake.layout import LakeLayout
    from tidelake.spark.session import get_session
    from tidelake.spark.syncpoint_job import run_syncpoint

    parser = argparse.ArgumentParser(prog="spark_jobs/syncpoint.py", description="tidelake syncpoint")
    parser.add_argument("--config", metavar="FILE", help="changefeed TOML: lake root and [merge].syncpoint_interval")
    parser.add_argument("--lake", metavar="PATH", help="lake root (folder or object-store URI)")
    parser.add_argument("--interval", type=int, metavar="S", help="seconds between syncpoints (overrides the config)")
    args = parser.parse_args(argv)
    try:
        if bool(args.config) == bool(args.lake):
            raise InputError("give exactly one of --lake PATH or --config FILE")
        interval = args.interval
        if args.lake:
            layout = LakeLayout(args.lake)
        else:
            from tidelake.config import load_config

            config = load_config(args.config)
            layout = LakeLayout(config.lake.root)
            interval = interval or config.merge.syncpoint_interval_s
        if interval is None or interval < 1:
            raise InputError("no syncpoint interval: pass --interval S (seconds >= 1) or set "
                             "[merge].syncpoint_interval in the changefeed config")
        result = run_syncpoint(get_session("tidelake-syncpoint", local=False), layout, interval)
    except TidelakeError as exc:
        print(f"tidelake syncpoint: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if result.recorded:
        cut = result.syncpoint
        print(f"syncpoint {result.ts}: {len(cut.replicas)} replicas"
              + (f", left out: {cut.excluded}" if cut.excluded else ""))
        return 0
    # SyncpointResult has no status field: a replica missing its version at S is the one failure
    # (the merge to S did not land); "no boundary yet" and "waiting" are normal outcomes.
    if result.ts is not None and result.reason and "has no Delta version" in result.reason:
        print(f"tidelake syncpoint: cut {result.ts} not taken: {result.reason}", file=sys.stderr)
        return 1
    print(f"no syncpoint this time: {result.reason or f'{result.ts} was already recorded'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
