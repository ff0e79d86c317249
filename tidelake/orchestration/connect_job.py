"""The merge DAG's Spark jobs as thin Spark Connect clients of a warm Spark (README "Warm Spark").

With a Spark Connect server configured (`[spark] remote` of the changefeed config, else the
DAG processor's SPARK_REMOTE), each merge or syncpoint task runs the same `tidelake` command as
spark_jobs/ would, from the Airflow task process, against that server: no JVM start, no Ivy
resolution, no cold Delta log per task. Without one, the DAG submits spark_jobs/ through
SparkSubmitOperator (tidelake.orchestration.spark_submit), to a cluster or local[*], as before.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence

from tidelake.config import ChangefeedConfig
from tidelake.errors import InputError, TidelakeError

log = logging.getLogger(__name__)


class JobFailed(TidelakeError):
    """The command finished with a failure exit code (a table failed or was stopped)."""


def job_remote(config: ChangefeedConfig, env: Mapping[str, str] | None = None) -> str | None:
    """The Spark Connect server the DAG's Spark jobs use, or None for spark-submit. Read where the
    DAG file is parsed (the DAG processor's environment), as the DAG's shape depends on it."""
    return config.spark.remote_or_env(os.environ if env is None else env)


def job_command(command: str, application_args: Sequence[str], remote: str) -> list[str]:
    """`tidelake <command> <application_args> --remote <remote>` with this interpreter."""
    return [sys.executable, "-m", "tidelake", command, *application_args, "--remote", remote]


def run_job(command: str, application_args: Sequence[str], remote: str) -> None:
    """Run the command as a child process (a Python start, no JVM), its output into the task log;
    exit code 2 (bad input) is InputError, which the DAG turns into a failure without retry; any
    other non-zero exit is JobFailed, so the task fails (and is retried) as a failed spark-submit
    would. A child keeps pyspark's Connect mode out of the Airflow task process."""
    argv = job_command(command, application_args, remote)
    log.info("running %s", " ".join(argv))
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env={**os.environ, "COLUMNS": "160"}) as child:
        for line in child.stdout:
            log.info("%s", line.rstrip())
    if child.returncode == InputError.exit_code:  # bad params or config: fail the task, no retry
        raise InputError(f"tidelake {command} {' '.join(application_args)} refused its input (see the log above)")
    if child.returncode != 0:
        raise JobFailed(f"tidelake {command} {' '.join(application_args)} exited with code {child.returncode}")
