"""spark-submit entry point of the merge: `spark-submit spark_jobs/merge.py [--table DB.TABLE ...]
[--until-ts TS] [--rebuild DB.TABLE] (--lake PATH | --config FILE)`. Master, Delta jars and confs come from the submit
command (tidelake.spark.session DELTA_CONFS); the work is tidelake.spark.merge_job.run_merge.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.cli.merge import add_merge_arguments, layout_from_args, merge_kwargs, progress_printer, render_report
from tidelake.errors import TidelakeError


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    from tidelake.spark.merge_job import run_merge
    from tidelake.spark.session import get_session

    parser = argparse.ArgumentParser(prog="spark_jobs/merge.py", description="tidelake merge (spark-submit)")
    add_merge_arguments(parser)
    args = parser.parse_args(argv)
    console = Console()
    try:
        layout = layout_from_args(args)
        spark = get_session("tidelake-merge", local=False)
        report = run_merge(spark, layout, progress=progress_printer(console), **merge_kwargs(args))
    except TidelakeError as exc:
        print(f"tidelake merge: error: {exc}", file=sys.stderr)
        return exc.exit_code
    console.print(render_report(report))
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
