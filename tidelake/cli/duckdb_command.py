"""`tidelake duckdb (--lake PATH | --config FILE) [--syncpoint TS]... [-c SQL]... [--csv]`: SQL in
DuckDB over the replicas (tidelake.consumers.duckdb_lake).

Every replica is the view `db.table`; the newest syncpoint's cut is `db__sp_latest.table`, and
each --syncpoint TS adds `db__sp_TS.table`. `delta_scan('PATH', version => V)` reads a replica
as of a Delta version. Each -c runs in turn and prints its result; without -c the SQL is read
from standard input. Unknown tables, syncpoints and bad SQL are one-line errors (exit 2).
Owner: `tidelake duckdb`.
"""

from __future__ import annotations

import argparse
import io
import sys

import duckdb
import pyarrow.csv as pacsv

from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.consumers.duckdb_lake import first_line, open_lake
from tidelake.errors import InputError

SHOWN_ROWS = 40  # the table printout, as DuckDB's own shell shows; --csv prints every row


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("duckdb", help="SQL in DuckDB over the replicas and syncpoint cuts")
    add_target_arguments(parser)
    parser.add_argument("--syncpoint", action="append", type=int, default=[], metavar="TS",
                        help="also open the cut of this syncpoint as schemas DB__sp_TS (repeatable)")
    parser.add_argument("-c", dest="commands", action="append", default=[], metavar="SQL",
                        help="run this SQL and print its result (repeatable); default: SQL from standard input")
    parser.add_argument("--csv", action="store_true", help="print every row as CSV instead of a table")
    parser.set_defaults(handler=_duckdb)


def _duckdb(args: argparse.Namespace) -> int:
    layout = resolve_target(args).layout
    commands = args.commands or [sys.stdin.read()]
    con = open_lake(layout, args.syncpoint)
    for sql in commands:
        try:
            result = con.sql(sql)
            if result is None:
                continue
            if args.csv:
                out = io.BytesIO()
                pacsv.write_csv(result.to_arrow_table(), out)
                sys.stdout.write(out.getvalue().decode())
            else:
                result.show(max_rows=SHOWN_ROWS)
        except duckdb.Error as exc:
            raise InputError(f"DuckDB: {first_line(exc)} (in: {' '.join(sql.split())[:200]})") from exc
    return 0
