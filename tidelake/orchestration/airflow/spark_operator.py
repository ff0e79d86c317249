"""TidelakeSparkSubmitOperator: SparkSubmitOperator plus the two things it lacks for tidelake.

1. A missing Spark connection silently becomes `--master yarn` in the provider
   (docs/stack.md#apache-airflow-providers-apache-spark-634). Here a missing connection means local[*], declared for this task process
   as an environment connection (Airflow's documented AIRFLOW_CONN_* form), with a warning.
2. The tidelake package is zipped at task time and passed as --py-files, so executors run the
   driver's exact code (spark_submit.build_package_zip).
3. The lake's `aws` connection ([lake].aws_conn_id of `config_path`) is the spark-submit's AWS
   environment (tidelake.orchestration.airflow.hooks.aws_lake), never an argument or a conf.
Owner: the merge, maintenance and bootstrap DAGs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from contextlib import ExitStack
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection_of
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task
from tidelake.orchestration.spark_submit import (
    LOCAL_MASTER_CONNECTION,
    build_package_zip,
)

log = logging.getLogger(__name__)


def ensure_spark_connection(conn_id: str) -> None:
    """Define `conn_id` as local[*] for this process unless Airflow already knows it."""
    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        log.warning("Spark connection %r is not defined: running on local[*]", conn_id)
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(LOCAL_MASTER_CONNECTION)


class TidelakeSparkSubmitOperator(SparkSubmitOperator):
    """Submits a spark_jobs/ entry point of the changefeed in `config_path`, tidelake attached."""

    ui_color = "#fde2c8"

    def __init__(self, *, config_path: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path

    def execute(self, context: Any) -> None:
        ensure_spark_connection(self._conn_id)
        package = build_package_zip(os.path.join(tempfile.gettempdir(), "tidelake-py-files"))
        self.py_files = ",".join(p for p in (self.py_files, str(package)) if p)
        with ExitStack() as stack:
            with input_errors_fail_the_task():  # a missing or wrong connection: one line, no retries
                stack.enter_context(lake_connection_of(self.config_path))
            return super().execute(context)
