"""`tidelake maintenance (--config FILE | --lake PATH) [--vacuum-retention-hours H]
[--merge-log-retention-hours H] [--skip STEP]`.

Compacts (OPTIMIZE) and vacuums the replicas, drops changelog partitions every replica has
merged past and merge-log entries older than its retention (tidelake.maintenance.lake_upkeep.run_maintenance). The maintenance DAG runs this through
spark_jobs/maintenance_job.py. A replica another writer holds is skipped with one line naming the holder,
and the exit code is then 75; so is a second pass while one runs (docs/operations.md#writer-leases).
Owner: `tidelake maintenance`.
"""

from __future__ import annotations

import argparse
import math
from datetime import timedelta

from tidelake.cli.spark_choice import add_spark_arguments, remote_choice
from tidelake.cli.target import add_target_arguments, resolve_target
from tidelake.config import IcebergConfig
from tidelake.consumers.iceberg.retention import IcebergRetention, lake_retention
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.maintenance.lake_upkeep import DEFAULT_VACUUM_RETENTION_HOURS, run_maintenance
from tidelake.merge.merge_log import DEFAULT_RETENTION, RECENT
from tidelake.spark.spark_session import get_session, release_session

STEPS = ("optimize", "vacuum", "changelog", "merge_log")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("maintenance", help="OPTIMIZE/VACUUM replicas, drop merged changelog partitions and old merge-log entries")
    add_target_arguments(parser)
    parser.add_argument("--vacuum-retention-hours", type=float, default=None, metavar="H",
                        help="keep files referenced by versions of the last H hours (default 168)")
    parser.add_argument("--merge-log-retention-hours", type=float, default=None, metavar="H",
                        help="keep merge-log entries of the last H hours before the newest (default 168, at least 4)")
    parser.add_argument("--skip", action="append", choices=STEPS, default=[], help="skip a step (repeatable)")
    add_spark_arguments(parser)
    parser.set_defaults(handler=_maintenance)


def _maintenance(args: argparse.Namespace) -> int:
    hours = DEFAULT_VACUUM_RETENTION_HOURS if args.vacuum_retention_hours is None else args.vacuum_retention_hours
    if not (math.isfinite(hours) and hours >= 0):
        raise InputError(f"--vacuum-retention-hours must be a finite number >= 0, got {hours}")
    log_hours = (DEFAULT_RETENTION.total_seconds() / 3600 if args.merge_log_retention_hours is None
                 else args.merge_log_retention_hours)
    if not (math.isfinite(log_hours) and log_hours >= RECENT.total_seconds() / 3600):
        raise InputError(f"--merge-log-retention-hours must be a finite number >= {RECENT.total_seconds() / 3600:g} "
                         f"(what status and the page read), got {log_hours}")
    target = resolve_target(args)
    iceberg = target.config.iceberg if target.config is not None else IcebergConfig()
    kept = lake_retention(target.layout, iceberg) if "vacuum" not in args.skip else IcebergRetention()
    spark = get_session("tidelake-maintenance", master=args.master, remote=remote_choice(args, target), lake=target.layout)
    try:
        report = run_maintenance(
            spark, target.layout,
            vacuum_retention_hours=hours, optimize="optimize" not in args.skip,
            vacuum="vacuum" not in args.skip, changelog_retention="changelog" not in args.skip,
            merge_log="merge_log" not in args.skip, merge_log_retention=timedelta(hours=log_hours),
            vacuum_holds=kept.holds,
        )
    finally:
        release_session(spark)
    print(f"changelog rows deleted: {report.changelog_rows_deleted}")
    print(f"merge log rows deleted: {report.merge_log_rows_deleted}")
    for path, removed in report.optimized.items():
        print(f"optimized {path} ({report.engines[path]}): {removed} files compacted")
    for expired in kept.expired:
        print(f"expired Iceberg tag {expired}")
    for path in report.vacuumed:
        print(f"vacuumed {path} ({report.engines[path]})")
    for line in report.held.values():
        print(line)
    for reason in report.skipped.values():
        print(f"skipped: {reason}")
    return EXIT_TRY_LATER if report.skipped else 0
