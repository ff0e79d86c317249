"""`tidelake snapshot-at TS [--json] (--lake PATH | --config FILE)`: the replicas' Delta versions
that together show upstream as of syncpoint TS (tidelake.syncpoint.records).

Read each table with `spark.read.format("delta").option("versionAsOf", V).load(path)` (or SQL
`VERSION AS OF V`). A TS that is not a syncpoint is an error naming the nearest ones: a cut
across tables exists only where one was recorded. Owner: `tidelake snapshot-at`.
"""

from __future__ import annotations

import argparse
import json

from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.syncpoint.records import read_syncpoints, replicas_at


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("snapshot-at", help="replica Delta versions of a cross-table syncpoint")
    parser.add_argument("ts", type=int, metavar="TS", help="syncpoint TSO")
    add_target_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_snapshot_at)


def _snapshot_at(args: argparse.Namespace) -> int:
    layout = resolve_target(args).layout
    replicas_at(layout, args.ts)  # raises with the nearest syncpoints when TS is not one
    syncpoint = next(s for s in read_syncpoints(layout) if s.ts == args.ts)
    if args.json:
        print(json.dumps({
            "ts": syncpoint.ts,
            "replicas": [{"table": r.qualified_name, "path": r.path, "version": r.version} for r in syncpoint.replicas],
            "excluded": syncpoint.excluded,
        }, indent=2))
        return 0
    width = max([len(r.qualified_name) for r in syncpoint.replicas] + [5])
    print(f"{'TABLE':<{width}}  VERSION  PATH")
    for r in syncpoint.replicas:
        print(f"{r.qualified_name:<{width}}  {r.version:>7}  {r.path}")
    for table, reason in syncpoint.excluded.items():
        print(f"{table:<{width}}  {'-':>7}  not in the cut: {reason}")
    return 0
