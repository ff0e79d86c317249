"""`tidelake iceberg sync (--config FILE | --lake PATH) [--catalog-uri URL]`: publish the replicas
to the Iceberg catalog at every recorded syncpoint not published yet
(tidelake.consumers.iceberg.sync); idempotent, it touches no Delta table.

The catalog comes from the changefeed's [iceberg] section (or --catalog-uri), by default a SQLite
file in a local lake's _tidelake/iceberg folder. Prints a line per snapshot published. Exit 0 when
every replica is published, 1 when one was refused (its line on stderr, the others published),
2 on bad input, 75 when the catalog did not answer or another publisher committed first (run again).
Owner: `tidelake iceberg`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.sync import sync_iceberg


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("iceberg", help="publish the replicas as Iceberg tables at each syncpoint")
    actions = parser.add_subparsers(dest="iceberg_action", metavar="ACTION", required=True)
    sync = actions.add_parser("sync", help="publish every syncpoint not yet published (no data is copied)")
    add_target_arguments(sync)
    sync.add_argument("--catalog-uri", metavar="URL",
                      help="SQLAlchemy URL of the SQL catalog (overrides [iceberg].catalog_uri)")
    sync.set_defaults(handler=_sync)


def _sync(args: argparse.Namespace) -> int:
    target = resolve_target(args)
    config = target.config.iceberg if target.config is not None else IcebergConfig()
    if args.catalog_uri:
        config = replace(config, catalog_uri=args.catalog_uri)
    report = sync_iceberg(open_catalog(target.layout, config), target.layout,
                          on_publish=lambda p: print(p.line(), flush=True))
    for line in report.refused.values():
        print(f"tidelake: error: {line}", file=sys.stderr)
    print(f"{len(report.published)} snapshots published, {report.current} tables were current, "
          f"{len(report.refused)} refused")
    return 1 if report.refused else 0
