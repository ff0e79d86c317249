"""`tidelake changes --table DB.T [--from-ts TS] [--to-ts TS] [--out FILE.parquet] [--json]`:
a replica's change data feed between two checkpoints (tidelake.consumers.replica_changes).

It prints which checkpoints and Delta versions the range covers and how many changes of each
kind it holds, and writes the rows to Parquet with --out. Pass the printed `to_checkpoint` as
the next --from-ts to read every change once. Owner: `tidelake changes`.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

import pyarrow.parquet as pq

from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.consumers.replica_changes import change_range, read_changes
from tidelake.errors import InputError
from tidelake.lake.replica_catalog import read_entries


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("changes", help="a replica's row changes between two checkpoints")
    parser.add_argument("--table", required=True, metavar="DB.TABLE", help="the replicated table")
    parser.add_argument("--from-ts", type=int, metavar="TS",
                        help="a checkpoint the replica recorded; default: since the replica's creation")
    parser.add_argument("--to-ts", type=int, metavar="TS",
                        help="up to the latest checkpoint at or before TS; default: the current checkpoint")
    parser.add_argument("--out", metavar="FILE", help="write the changes to this Parquet file")
    parser.add_argument("--json", action="store_true", help="print the range as JSON")
    add_target_arguments(parser)
    parser.set_defaults(handler=_changes)


def _changes(args: argparse.Namespace) -> int:
    layout = resolve_target(args).layout
    db, dot, name = args.table.partition(".")
    if not dot:
        raise InputError(f"--table {args.table!r}: give the table as DB.TABLE")
    entry = next((e for e in read_entries(layout).values() if (e.db, e.name) == (db, name)), None)
    if entry is None:
        raise InputError(f"--table {args.table}: no replica of that name in {layout.root}")
    rng = change_range(entry.path, args.from_ts, args.to_ts, layout.storage_options)
    changes = read_changes(rng, layout.storage_options)
    if args.out:
        pq.write_table(changes, args.out)
    kinds = Counter(changes.column("_change_type").to_pylist())
    report = {
        "table": args.table, "path": entry.path, "from_checkpoint": rng.from_checkpoint,
        "to_checkpoint": rng.to_checkpoint, "first_version": rng.first_version, "last_version": rng.last_version,
        "rows": changes.num_rows, "by_change_type": dict(sorted(kinds.items())), "out": args.out,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    start = "the replica's creation" if rng.from_checkpoint is None else f"checkpoint {rng.from_checkpoint}"
    print(f"{args.table}: changes after {start} up to checkpoint {rng.to_checkpoint} "
          f"(Delta versions {rng.first_version}..{rng.last_version}): {changes.num_rows} rows")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind:<17} {count}")
    if args.out:
        print(f"written to {args.out}")
    return 0
