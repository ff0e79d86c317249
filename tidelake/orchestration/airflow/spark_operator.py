"""TidelakeSparkOperator: one Spark job spec of a changefeed on the Spark its connection's type names
at task time, so a DAG has one shape whichever Spark runs the jobs. A `spark` connection: spark-submit
of spark_jobs/<job>_job.py (client deploy mode: the driver is the task's child on the worker) with
the Delta jars and confs and the connection's extras (spark_submit.SparkSettings.from_extras); a
missing one is local[*] for this task. A `spark_connect` connection: the job runs in this task as a
thin Connect client (job_entry). The lake's `aws` connection (hooks.aws_lake) and, for a job that
dials PD, [upstream].connection (upstream_handoff) reach the job in the task's environment, never
an argument. Owner: the merge, maintenance and bootstrap DAGs.

More: docs/internals.md#spark_operator.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from airflow.sdk.log import mask_secret

from tidelake.config import ChangefeedConfig, load_config
from tidelake.errors import InputError
from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection, task_environment
from tidelake.orchestration.airflow.hooks.config_source import refresh_config
from tidelake.orchestration.airflow.hooks.tidb_pd import TiDBPDHook
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task
from tidelake.orchestration.spark_submit import (
    CONNECT_CONN_TYPE,
    DEFAULT_CONN_ID,
    JOBS_DIR,
    LOCAL_MASTER_CONNECTION,
    SUBMIT_CONN_TYPE,
    SparkSettings,
    build_package_zip,
    spark_submit_kwargs,
)
from tidelake.orchestration.job_spec import KINDS
from tidelake.orchestration.upstream_handoff import handoff_environment

log = logging.getLogger(__name__)
# Jobs that need classic Spark (RDDs, the JVM): the bootstrap reads TiKV in executor tasks.
CLASSIC_ONLY = ("bootstrap",)


def spark_connection(conn_id: str) -> tuple[str, dict[str, Any]]:
    """The connection's type and extras; an undefined one becomes local[*] for this process."""
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        log.warning("Spark connection %r is not defined: running on local[*]", conn_id)
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(LOCAL_MASTER_CONNECTION)
        return SUBMIT_CONN_TYPE, {}
    if conn.conn_type not in (SUBMIT_CONN_TYPE, CONNECT_CONN_TYPE):
        raise InputError(f"Spark connection {conn_id!r}: conn_type: is {conn.conn_type!r}, expected "
                         f"{SUBMIT_CONN_TYPE!r} (spark-submit) or {CONNECT_CONN_TYPE!r} (Spark Connect)")
    if conn.conn_type == CONNECT_CONN_TYPE and conn.password:
        mask_secret(conn.password)  # the Connect token, part of the sc:// URL
    return conn.conn_type, conn.extra_dejson


class TidelakeSparkOperator(SparkSubmitOperator):
    """Runs the `job` spec (the one application argument) of the changefeed in `config_path` (written
    from connection `config_conn_id` when given) on the Spark of connection `conn_id` (module docstring)."""

    ui_color = "#fde2c8"

    def __init__(self, *, config_path: str, job: str, conn_id: str = DEFAULT_CONN_ID,
                 config_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(application=str(JOBS_DIR / f"{job}_job.py"), conn_id=conn_id, deploy_mode="client",
                         **kwargs)
        self.config_path = config_path
        self.config_conn_id = config_conn_id
        self.job = job

    def execute(self, context: Any) -> None:
        with ExitStack() as stack:
            with input_errors_fail_the_task():  # a bad connection or config: one line, no retries
                kind, extras = spark_connection(self._conn_id)
                refresh_config(self.config_conn_id)
                config = load_config(self.config_path)
                stack.enter_context(lake_connection(config.lake))
                if kind == CONNECT_CONN_TYPE and self.job in CLASSIC_ONLY:
                    raise InputError(f"{CONNECT_CONN_TYPE} connection {self._conn_id!r}: the {self.job} job "
                                     "needs classic Spark (RDDs); give it a `spark` connection")
                stack.enter_context(self._upstream_for_the_job(config))
                if kind == CONNECT_CONN_TYPE:
                    url = SparkConnectHook(self._conn_id).get_connection_url()
                else:
                    settings = SparkSettings.from_extras(self._conn_id, extras)
                    submit = spark_submit_kwargs(settings, job=self.job, app_name=self.name, lake=config.lake)
            if kind == CONNECT_CONN_TYPE:
                return self._run_connected(url)
            self.application = submit["application"]
            self.conf = {**submit["conf"], **(self.conf or {})}
            self.packages = submit.get("packages")
            self.env_vars = submit["env_vars"]
            package = build_package_zip(os.path.join(tempfile.gettempdir(), "tidelake-py-files"))
            self.py_files = ",".join(p for p in (self.py_files, str(package)) if p)
            return super().execute(context)

    @contextmanager
    def _upstream_for_the_job(self, config: ChangefeedConfig) -> Iterator[None]:
        """A job that dials PD gets [upstream].connection resolved here, where Airflow's connections
        are read, as the task's HANDOFF_ENV (upstream_handoff): its PEM files live in this task's
        temp folder on the worker until the job ends. Other jobs, and a config naming PD: nothing."""
        conn_id, spec = config.upstream.connection, KINDS.get(self.job)
        if conn_id is None or spec is None or not spec.dials_pd:
            yield
            return
        with TiDBPDHook(conn_id).upstream(config.upstream.gc_ttl_s) as upstream, \
                task_environment(handoff_environment(conn_id, upstream)):
            yield

    def _run_connected(self, url: str) -> None:
        # Spark loads in the task, never where the DAG file is parsed
        from tidelake.orchestration.job_entry import run_on_warm_spark

        with input_errors_fail_the_task():
            run_on_warm_spark(self.application_args[0], url)
