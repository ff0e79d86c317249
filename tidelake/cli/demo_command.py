"""`tidelake demo [--workdir DIR] [--duration S] [--seed N] [--keep]`: the whole path end to end.

Simulated cluster -> puller -> lake -> Spark merge -> verify, in one process on loopback
(tidelake.demos.one_process). Exit 0 when every replica verifies, 1 otherwise.
Owner: `tidelake demo`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.table import Table

from tidelake.cli.report_console import report_console
from tidelake.demos.one_process import DemoResult, OneProcessOptions, run_demo
from tidelake.status.status_report import utc_text
from tidelake.verify.verifier import Verdict


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
    console = report_console()
    result = run_demo(OneProcessOptions(args.workdir, args.duration, args.seed, args.keep), console)
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


def summary_table(result: DemoResult) -> Table:
    """Per table: rows, checkpoint, lag, verified ✓/✗."""

    lag = {t.table: t.lag_seconds for t in result.status.tables}
    table = Table(title=f"tidelake demo — {result.merge_cycles} merge cycles, final ts {result.final_ts}")
    for header in ("table", "rows", "checkpoint (UTC)", "lag", "verified"):
        table.add_column(header, justify="right" if header in ("rows", "lag") else "left")
    for v in result.verify.tables:
        mark = {Verdict.MATCH: "[green]✓[/]", Verdict.SKIPPED: f"[dim]– {v.note}[/]"}.get(v.status, f"[red]✗ {v.note or v.status}[/]")
        seconds = lag.get(v.table)
        table.add_row(v.table, str(v.replica_rows) if v.status != Verdict.SKIPPED else "-", utc_text(v.checkpoint) or "-",
                      "-" if seconds is None else f"{seconds:.1f}s", mark)
    return table
