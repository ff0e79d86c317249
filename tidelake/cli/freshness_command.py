"""`tidelake freshness [--since 10m] [--table db.t ...] [--json] (--config FILE | --lake PATH)`:
seconds from upstream commit to landed, covered, merged and in a syncpoint, per stage and table.
Owner: `tidelake freshness` (the work: tidelake.status.freshness).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from tidelake.cli.report_console import report_console
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.status.freshness import DEFAULT_SPAN_S, QUANTILES, FreshnessReport, StageFigures, collect_freshness, parse_span


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "freshness",
        help="seconds from upstream commit to landed, covered, merged and syncpoint (p50/p95/p99/max)",
        description="Per stage and per table, for the changes landed within the span: seconds from their upstream "
                    "commit to the first lake version showing them landed (changelog), covered (watermarks), "
                    "merged (replica) and in a syncpoint, and how many are still pending at each stage. "
                    "Reads only the Delta log versions committed within the span.",
    )
    add_target_arguments(parser)
    parser.add_argument("--since", default=f"{DEFAULT_SPAN_S // 60}m", metavar="SPAN",
                        help="the span: changes landed within it, e.g. 90s, 10m, 1h30m (default: %(default)s)")
    parser.add_argument("--table", action="append", default=[], metavar="DB.TABLE",
                        help="only this table (repeatable); default every table")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_freshness)


def _freshness(args: argparse.Namespace) -> int:
    span_s = parse_span(args.since)
    target = resolve_target(args)
    report = collect_freshness(target.layout, span_s, args.table or None)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print_freshness(report, report_console())
    return 0


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}s"


def _row(name: str, stage: str, figures: StageFigures) -> list[str]:
    return [name, stage, f"{figures.shown:,}", *(_seconds(figures.quantiles[q]) for q in QUANTILES),
            _seconds(figures.max_s), f"{figures.pending:,}" + (f" (oldest {_seconds(figures.oldest_pending_s)})"
                                                             if figures.pending else "")]


def print_freshness(report: FreshnessReport, console: Console) -> None:
    """The overall figures per stage, then each table's."""
    table = Table(title=f"tidelake freshness — {report.lake}",
                  caption=f"{report.changes:,} changes landed in the last {report.span_s:,.0f}s; "
                          f"seconds from upstream commit" + ("" if report.syncpoints else "; no syncpoints recorded"))
    for header in ("table", "stage", "shown", *(f"p{q}" for q in QUANTILES), "max", "pending"):
        table.add_column(header, justify="left" if header in ("table", "stage") else "right",
                         no_wrap=header == "table")
    for stage in report.shown_stages:
        table.add_row(*_row("all tables" if stage == report.shown_stages[0] else "", stage, report.stages[stage]))
    for name, figures in sorted(report.tables.items()):
        table.add_section()
        for stage in report.shown_stages:
            table.add_row(*_row(name if stage == report.shown_stages[0] else "", stage, figures[stage]))
    console.print(table)
