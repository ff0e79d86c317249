"""A `tidelake` command run by spark-submit (the spark_jobs/ entry points).

spark-submit sets the master, the Delta jars and the confs; the session built from them here is
the active one, which the command's own get_session() then reuses, so a command behaves the same
on local Spark and on a cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidelake.cli import main


def run_submitted(command: str, argv: Sequence[str]) -> int:
    from tidelake.spark.spark_session import get_session

    get_session(f"tidelake-{command}", local=False)
    return main([command, *argv])
