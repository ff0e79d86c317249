"""spark-submit entry point of lake maintenance: `spark-submit spark_jobs/maintenance.py
(--lake PATH | --config FILE) [--vacuum-retention-hours H] [--skip optimize|vacuum|changelog]`.
Master, Delta jars and confs come from the submit command; the work is
tidelake.spark.maintenance.run_maintenance.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.errors import InputError, TidelakeError

STEPS = ("optimize", "vacuum", "changelog")


def main(argv: list[str] | None = None) -> int:
    from tidelake.lake.layout import LakeLayout
    from tidelake.spark.maintenance import DEFAULT_VACUUM_RETENTION_HOURS, run_maintenance
    from tidelake.spark.session import get_session

    parser = argparse.ArgumentParser(prog="spark_jobs/maintenance.py", description="tidelake maintenance")
    parser.add_argument("--lake", metavar="PATH", help="lake root (folder or object-store URI)")
    parser.add_argument("--config", metavar="FILE", help="changefeed TOML: the lake root is taken from it")
    parser.add_argument("--vacuum-retention-hours", type=float, default=DEFAULT_VACUUM_RETENTION_HOURS,
                        metavar="H", help="keep files referenced by versions of the last H hours (default 168)")
    parser.add_argument("--skip", action="append", choices=STEPS, default=[], help="skip a step (repeatable)")
    args = parser.parse_args(argv)
    try:
        if bool(args.config) == bool(args.lake):
            raise InputError("give exactly one of --lake PATH or --config FILE")
        if args.vacuum_retention_hours < 0:
            raise InputError(f"--vacuum-retention-hours must be >= 0, got {args.vacuum_retention_hours}")
        if args.lake:
            layout = LakeLayout(args.lake)
        else:
            from tidelake.config import load_config

            layout = LakeLayout(load_config(args.config).lake.root)
        report = run_maintenance(
            get_session("tidelake-maintenance", local=False), layout,
            vacuum_retention_hours=args.vacuum_retention_hours, optimize="optimize" not in args.skip,
            vacuum="vacuum" not in args.skip, changelog_retention="changelog" not in args.skip,
        )
    except TidelakeError as exc:
        print(f"tidelake maintenance: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"changelog rows deleted: {report.changelog_rows_deleted}")
    for path, removed in report.optimized.items():
        print(f"optimized {path}: {removed} files compacted")
    for path in report.vacuumed:
        print(f"vacuumed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
