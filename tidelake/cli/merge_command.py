"""`tidelake merge [--table DB.TABLE ...] [--until-ts TS] [--rebuild DB.TABLE] [--follow] [--lake PATH | --config FILE]`.

Runs merge cycles once on local Spark: each replica advances to min(resolvedTs, barrierTs,
--until-ts), applying DDLs at barriers; --follow keeps doing it (tidelake.cli.follow_run).
Exit code 0 when tables merged or had nothing to do; 1 when a table failed or was stopped by an
unsupported DDL; 75 (EX_TEMPFAIL) when no table advanced because the ones with work were blocked,
or when the store had no room (docs/operations.md#merge-exit-codes).
Owner: `tidelake merge` (the work: tidelake.merge.merge_run).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.markup import escape
from rich.table import Table

from tidelake import tso
from tidelake.cli.follow_run import follow
from tidelake.cli.report_console import report_console
from tidelake.cli.spark_choice import add_spark_arguments, remote_choice
from tidelake.cli.target import Target, add_target_arguments, resolve_target
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.merge.follow import FOLLOW_THREADS
from tidelake.merge.merge_run import DEFAULT_THREADS, MergeReport, run_merge
from tidelake.merge.table_merge import MergeProgress
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS
from tidelake.spark.spark_session import get_session, release_session
from tidelake.status.freshness_metrics import write_freshness_metrics


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", action="append", metavar="DB.TABLE", help="merge only this table (repeatable)")
    parser.add_argument("--until-ts", type=int, metavar="TS", help="cap: advance no replica beyond this TSO")
    add_target_arguments(parser)
    parser.add_argument(
        "--rebuild", metavar="DB.TABLE",
        help="replay this table into a new empty replica from its CREATE (refused unless the changelog "
        "still holds all its changes)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, metavar="N",
        help=f"tables merged at once, each in its own Spark session (default {DEFAULT_THREADS}, "
        f"{FOLLOW_THREADS} with --follow)",
    )
    parser.add_argument(
        "--max-chunk-rows", type=int, default=None, metavar="N",
        help="changes per MERGE commit (a bigger window is cut at commit-ts quantiles)",
    )
    parser.add_argument(
        "--follow", action="store_true",
        help="keep running: merge as the watermarks advance and take the syncpoints, until SIGTERM/SIGINT",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("merge", help="advance replicas to min(resolved ts, next DDL), on local Spark")
    add_merge_arguments(parser)
    add_spark_arguments(parser)
    parser.set_defaults(handler=_merge)


def target_from_args(args: argparse.Namespace) -> Target:
    if args.until_ts is not None and not 0 < args.until_ts < tso.LIMIT:
        raise InputError(f"--until-ts must be a positive TSO below 2^64, got {args.until_ts}")
    if args.max_chunk_rows is not None and args.max_chunk_rows <= 0:
        raise InputError(f"--max-chunk-rows must be positive, got {args.max_chunk_rows}")
    if args.threads is not None and args.threads <= 0:
        raise InputError(f"--threads must be positive, got {args.threads}")
    return resolve_target(args)


def merge_kwargs(args: argparse.Namespace) -> dict:
    return {
        "tables": args.table or None,
        "until_ts": args.until_ts,
        "max_chunk_rows": args.max_chunk_rows or DEFAULT_CHUNK_ROWS,
        "rebuild": args.rebuild,
        "threads": args.threads or DEFAULT_THREADS,
    }


def progress_printer(console) -> Callable[[MergeProgress], None]:
    def show(event: MergeProgress) -> None:
        console.print(f"[bold]{event.table}[/bold] {event.kind}: {event.detail} (checkpoint {event.checkpoint})")

    return show


def render_report(report: MergeReport):
    """The run as a rich table: one row per table."""
    now = tso.compose(int(time.time() * 1000), 0)
    table = Table(title=f"merge run {report.run_id[:8]}")
    columns = ("table", "status", "checkpoint", "lag", "windows", "DDLs", "changes", "rows written", "seconds", "reason")
    for column in columns:
        table.add_column(column, justify="left" if column in ("table", "status", "reason") else "right")
    for r in report.tables:
        checkpoint = r.checkpoint_after
        lag = f"{tso.lag_seconds(checkpoint, now):.1f}s" if checkpoint else "-"
        table.add_row(
            r.table, r.status, str(checkpoint) if checkpoint is not None else "-", lag, str(r.windows),
            str(r.ddls_applied), str(r.rows_in), str(r.rows_out), f"{r.duration_s:.1f}", r.reason or "",
        )
    return table




def exit_code(report: MergeReport, console) -> int:
    """EXIT_TRY_LATER, with one line saying why, when the store had no room (every failed table
    failed for it, or the merge log could not be written); 1 when a table failed or stopped;
    EXIT_TRY_LATER when no table advanced because the tables with work are blocked; else 0."""
    no_room = report.no_room
    if no_room:
        first = no_room[0]
        console.print(f"stopped for lack of room: {len(no_room)} of {len(report.tables)} tables not merged "
                      f"({escape(first.table)}: {escape(first.reason or 'no reason given')}); run again once "
                      "the store has room", markup=True)
        return EXIT_TRY_LATER
    if report.failed:
        return 1
    if report.log_refused:
        console.print(f"merge log not written: {escape(report.log_refused)}; status shows the previous run "
                      "until the next one", markup=True)
        return EXIT_TRY_LATER
    blocked = report.blocked
    if blocked:
        first = blocked[0]
        console.print(f"nothing merged: {len(blocked)} of {len(report.tables)} tables are blocked "
                      f"({escape(first.table)}: {escape(first.reason or 'no reason given')})", markup=True)
        return EXIT_TRY_LATER
    return 0


def _merge(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    if args.follow:
        return follow(args, target)
    console = report_console()
    spark = get_session("tidelake-merge", master=args.master, remote=remote_choice(args, target), lake=target.layout)
    try:
        report = run_merge(spark, target.layout, progress=progress_printer(console),
                           history_config=target.config.history if target.config is not None else None,
                           **merge_kwargs(args))
    finally:
        release_session(spark)
    console.print(render_report(report))
    write_freshness_metrics(target.layout)  # docs/operations.md#metrics
    return exit_code(report, console)
