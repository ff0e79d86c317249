"""`tidelake demo [--workdir DIR] [--duration S] [--seed N] [--keep]`: the whole path end to end.

Simulated cluster -> puller -> lake -> Spark merge -> verify, in one process on loopback
(tidelake.demo). Exit 0 when every replica verifies, 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run sim cluster, puller, merge and verify end to end on this machine",
        description="Replicate a simulated TiDB (workload, every DDL kind, faults) into a local Delta lake, "
        "then verify every replica against a snapshot read of the upstream.",
    )
    parser.add_argument("--workdir", type=Path, help="where the lake and changefeed.toml go (default: a temp folder)")
    parser.add_argument("--duration", type=float, default=40.0, metavar="S", help="seconds of traffic (default 40)")
    parser.add_argument("--seed", type=int, default=1, help="seed of workload, DDL tour and faults (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the lake and config afterwards")
    parser.set_defaults(handler=_demo)


def _demo(args: argparse.Namespace) -> int:
    from tidelake.cli.report_console import report_console
    from tidelake.demo import DemoOptions, run_demo, summary_table

    console = report_console()
    result = run_demo(DemoOptions(args.workdir, args.duration, args.seed, args.keep), console)
    console.print(summary_table(result))
    faults = ", ".join(f"{n} {kind}" for kind, n in result.faults.items())
    console.print(f"DDL kinds run: {', '.join(result.ddl_kinds)}")
    console.print(f"faults injected: {faults}; workload: {result.workload.get('txns', 0)} txns, "
                  f"{result.workload.get('rows', 0)} rows")
    if args.keep:
        console.print(f"kept {result.workdir}: try `tidelake status --config {result.workdir / 'changefeed.toml'}`")
    console.print("[green]demo passed: every replica equals upstream at its checkpoint[/]" if result.ok
                  else "[red]demo failed: verify found differences (see above)[/]")
    return 0 if result.ok else 1
