"""spark-submit entry point of the bootstrap: `spark-submit spark_jobs/bootstrap.py --config FILE
[--at-ts TS] [--table DB.TABLE ...]`. Master, Delta jars and confs come from the submit command;
large tables are read by the cluster's executors, one task per region range
(tidelake.bootstrap.spark_snapshot); the work is tidelake.bootstrap.runner.Bootstrap.
"""

from __future__ import annotations

import argparse
import sys

from tidelake.cli.bootstrap import add_bootstrap_arguments, run_and_report
from tidelake.errors import TidelakeError


def main(argv: list[str] | None = None) -> int:
    from tidelake.spark.session import get_session

    parser = argparse.ArgumentParser(prog="spark_jobs/bootstrap.py", description="tidelake bootstrap (spark-submit)")
    add_bootstrap_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_and_report(args, spark=get_session("tidelake-bootstrap", local=False))
    except TidelakeError as exc:
        print(f"tidelake bootstrap: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
