"""`tidelake verify [--config FILE | --pd ADDR --lake PATH] [--table DB.TABLE ...]`.

Compares every replica at its checkpoint with a snapshot read of the upstream at that ts
(tidelake.verify.verifier); with `[iceberg] enabled` in the config, also each replica's Iceberg
table at the newest syncpoint's tag with its Delta version there (tidelake.verify.iceberg_side). Exit 0 when all compared tables match (tables not merged yet are listed, not
failed), 1 on any mismatch, table that could not be compared, or when no table was compared at all;
2 on bad input (a lake that is not a tidelake lake is refused before Spark starts or PD is dialled).
Owner: `tidelake verify`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from tidelake import tso
from tidelake.cli.report_console import report_console
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.errors import InputError
from tidelake.spark.spark_session import get_session
from tidelake.upstream.kv_snapshot import SnapshotReader
from tidelake.upstream.pd_client import PDClient
from tidelake.verify.iceberg_side import IcebergVerdict, iceberg_ok, verify_iceberg
from tidelake.verify.verifier import SPARK_CONFS, Verdict, Verifier


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="compare replicas at their checkpoint with a snapshot read of the upstream",
        description="Check that each replica at checkpoint c equals upstream TiDB read at c (exit 1 if not).",
    )
    add_target_arguments(parser, pd=True, pd_required=True)
    parser.add_argument("--table", action="append", default=[], metavar="DB.TABLE", help="only this table (repeatable)")
    parser.add_argument("--max-diffs", type=int, default=10, metavar="N", help="differing keys to show per table")
    parser.set_defaults(handler=_verify)


def _verify(args: argparse.Namespace) -> int:
    if args.max_diffs < 0:
        raise InputError(f"--max-diffs must be >= 0, got {args.max_diffs}")
    target = resolve_target(args, pd_required=True)
    iceberg = target.config.iceberg if target.config is not None else None
    catalog = open_catalog(target.layout, iceberg) if iceberg is not None and iceberg.enabled else None
    console = Console(stderr=True)
    # Before any gRPC thread runs: see tidelake.bootstrap.bootstrap_run.Bootstrap.run.
    spark = get_session("tidelake-verify", lake=target.layout, extra_confs=SPARK_CONFS)
    pd = PDClient(target.pd, target.tls, caller_id="tidelake-verify")
    try:
        with SnapshotReader(pd, target.tls) as reader, console.status("verifying") as status:

            def progress(table: str, phase: str, rows: int) -> None:
                status.update(f"verifying {table}: {phase} {rows:,} rows read")

            verifier = Verifier(spark, target.layout, reader, max_diffs=args.max_diffs, progress=progress)
            report = verifier.run(args.table)
    finally:
        pd.close()
    published = verify_iceberg(spark, catalog, target.layout, args.table) if catalog is not None else []
    print_report(report, report_console(), published)
    return 0 if report.ok and iceberg_ok(published) else 1


def _outcome(status: str, match: str, mismatch: str, note: str | None) -> str:
    """A verdict as the text after a table's head: `match` or `mismatch` details, else the note."""
    if status == Verdict.MATCH:
        return f"[green]✓ match[/] {match}"
    if status == Verdict.MISMATCH:
        return f"[red]✗ mismatch[/] {mismatch}"
    return f"{'[dim]– skipped[/]' if status == Verdict.SKIPPED else '[red]✗ error[/]'} ({note})"


def history_line(h) -> str:
    """One line for a history table: at how many upstream ts it was compared and the outcome."""
    gc = f", {h.gc_skipped} below the GC safepoint" if h.gc_skipped and h.status != Verdict.ERROR else ""
    worst = "; ".join(f"at {ts}: {m} missing, {e} extra, {d} different" for ts, m, e, d in h.mismatched[:3])
    return (f"{h.table} history (checkpoint {h.checkpoint}): "
            + _outcome(h.status, f"at {h.points} upstream ts ({h.rows:,} rows)",
                       f"at {len(h.mismatched)} of {h.points} ts ({worst or h.note})", h.note) + gc)


def iceberg_line(v: IcebergVerdict) -> str:
    """One line for a replica's Iceberg table at the newest syncpoint's tag."""
    counts = f"{v.delta_rows:,} Delta rows, {v.iceberg_rows:,} Iceberg rows, {v.missing} missing, {v.extra} extra"
    return (f"{v.table} Iceberg at syncpoint-{v.ts} (Delta version {v.delta_version}): "
            + _outcome(v.status, f"({v.iceberg_rows:,} rows, snapshot {v.snapshot_id})",
                       f"(snapshot {v.snapshot_id}: {v.note or counts})", v.note))


def print_report(report, console, iceberg: Sequence[IcebergVerdict] = ()) -> None:
    """One row per table, then the first differing keys of each mismatching table, then a line per
    Iceberg table."""

    marks = {Verdict.MATCH: "[green]✓ match[/]", Verdict.MISMATCH: "[red]✗ mismatch[/]", Verdict.SKIPPED: "[dim]– skipped[/]"}
    table = Table(title="tidelake verify")
    for header in ("table", "checkpoint (UTC)", "version", "upstream", "replica", "missing", "extra", "different", "result"):
        table.add_column(header, justify="right" if header in ("version", "upstream", "replica", "missing", "extra", "different") else "left")
    for v in report.tables:
        when = f"{tso.to_datetime(v.checkpoint):%Y-%m-%d %H:%M:%S} ({v.checkpoint})" if v.checkpoint else "-"
        compared = v.status in (Verdict.MATCH, Verdict.MISMATCH)
        counts = [str(n) if compared else "-" for n in (v.upstream_rows, v.replica_rows, v.missing, v.extra, v.different)]
        result = marks.get(v.status, "[red]✗ error[/]") + (f" ({v.note})" if v.note else "")
        table.add_row(v.table, when, "-" if v.delta_version is None else str(v.delta_version), *counts, result)
    console.print(table)
    for v in report.tables:
        for problem in v.schema_problems:
            console.print(f"[red]{v.table}[/]: {problem}")
        if v.diffs:
            console.print(f"[bold]{v.table}[/]: first differing keys")
            for d in v.diffs:
                console.print(f"  {d.kind} key={d.key!r}\n    upstream: {d.upstream!r}\n    replica:  {d.replica!r}")
        if v.soft_deleted is not None:
            bad = f", [red]{v.deleted_but_upstream} still upstream[/]" if v.deleted_but_upstream else ", none upstream"
            console.print(f"{v.table}: soft deletes: {v.soft_deleted} rows flagged deleted{bad}")
    for h in report.histories:
        console.print(history_line(h), highlight=False)
    for v in iceberg:
        console.print(iceberg_line(v), highlight=False)
    compared = report.compared
    rows = sum(v.upstream_rows for v in compared)
    summary = f"{len(compared)} of {len(report.tables)} tables compared, {rows:,} upstream rows"
    if iceberg and not iceberg_ok(iceberg):
        console.print(f"[red]verify failed: an Iceberg table differs from its replica[/] ({summary})", highlight=False)
    elif report.ok:
        console.print(f"[green]all replicas match upstream[/] ({summary})", highlight=False)
    elif not compared:
        console.print(f"[red]verify failed: nothing to compare[/] ({summary}; no table has a merged replica)",
                      highlight=False)
    else:
        console.print(f"[red]verify failed[/] ({summary})", highlight=False)
    sys.stdout.flush()
