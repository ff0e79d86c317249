"""`tidelake status [--json] [--exact] [--config FILE | --lake PATH [--pd ADDR]]`: watermarks, lag, pending DDL.

The JSON form is the stable schema documented in tidelake.status.status_report.
Owner: `tidelake status` (the work: tidelake.status.status_report).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.table import Table

from tidelake.cli.report_console import report_console
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.status.status_report import StatusReport, collect_status, utc_text
from tidelake.upstream.pd_client import PDClient


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "status",
        help="per-table watermarks, checkpoint, lag, pending DDL and last merge",
        description="Show where each replica stands: resolved/barrier/checkpoint ts, lag, pending DDL, last merge.",
    )
    add_target_arguments(parser, pd=True)
    parser.add_argument("--json", action="store_true", help="print the stable JSON document instead of a table")
    parser.add_argument("--exact", action="store_true",
                        help="read every replica's own Delta log instead of what its last merge run recorded "
                             "(exact after a merge run that died before logging; slower with many replicas)")
    parser.set_defaults(handler=_status)


def _status(args: argparse.Namespace) -> int:
    target = resolve_target(args, pd_required=False)
    now_ts = None
    if target.pd:
        pd = PDClient(target.pd, target.tls, caller_id="tidelake-status")
        try:
            now_ts = pd.get_ts()
        finally:
            pd.close()
    report = collect_status(target.layout, now_ts, exact=args.exact)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print_status(report, report_console())
    return 0


def _ts_cell(ts: int | None) -> str:
    return "-" if ts is None else f"{utc_text(ts)}\n[dim]{ts}[/]"


def _lag_cell(lag: float | None) -> str:
    if lag is None:
        return "-"
    colour = "green" if lag < 60 else "yellow" if lag < 600 else "red"
    return f"[{colour}]{lag:,.1f}s[/]"


def _readers_cell(features: list[str] | None, deltalake_readable: bool | None) -> str:
    if features is None:
        return "-"
    mark = "[green]deltalake ✓[/]" if deltalake_readable else "[red]deltalake ✗[/]"
    return f"{', '.join(features) or 'no reader features'}\n{mark}"


def print_status(report: StatusReport, console: Console) -> None:
    clock = "PD TSO" if report.now_source == "pd" else "wall clock"
    table = Table(title=f"tidelake status — {report.lake}", caption=f"now {utc_text(report.now_ts)} ({clock}); "
                  f"DDL resolved {utc_text(report.ddl_resolved_ts) or '-'}; changelog v{report.changelog_version}")
    for header in ("table", "state", "resolved", "barrier", "checkpoint", "lag", "pending DDL", "last merge", "readers",
                   "note"):
        table.add_column(header, justify="right" if header == "lag" else "left", no_wrap=header == "table")
    for t in report.tables:
        ddl = f"{t.pending_ddl.action}\njob {t.pending_ddl.job_id}" if t.pending_ddl else "-"
        merge = "-"
        if t.last_merge is not None:
            m = t.last_merge
            merge = f"{m.status} {m.duration_s:.1f}s\n{m.rows_in:,} in / {m.rows_out:,} out"
        note = t.last_error or t.blocked or (f"bound: {t.bound}" if t.bound else "")
        table.add_row(t.table, t.state, _ts_cell(t.resolved_ts), _ts_cell(t.barrier_ts), _ts_cell(t.checkpoint_ts),
                      _lag_cell(t.lag_seconds), ddl, merge, _readers_cell(t.reader_features, t.deltalake_readable),
                      note)
    console.print(table)
    _print_history(report, console)


def _print_history(report: StatusReport, console: Console) -> None:
    """The replicas' history tables and soft deletes (docs/history.md), if any."""
    kept = [t for t in report.tables if t.history is not None or t.soft_deletes]
    if not kept:
        return
    table = Table(title="history for consumers")
    for header in ("table", "soft deletes", "history table", "history checkpoint", "history since"):
        table.add_column(header, no_wrap=header == "table")
    for t in kept:
        h = t.history
        table.add_row(t.table, "yes" if t.soft_deletes else "no", h.path if h else "-",
                      _ts_cell(h.checkpoint_ts) if h else "-", _ts_cell(h.since_ts) if h else "-")
    console.print(table)
