"""The bootstrap DAG (tidelake_bootstrap): manual initial snapshot of tables into their replicas (one per changefeed).

Trigger with params `tables` (["db.table", ...]; empty = every table the changefeed's filter
selects; a table outside the filter is added to the RUNNING changefeed) and `at_ts` (a TSO;
empty = PD's current TSO). One spark-submit of spark_jobs/bootstrap_job.py on the factory's bootstrap
Spark connection (a `spark` one: it reads with RDDs): large tables are read by the executors, one
task per region range. It holds a PD service GC safepoint for the whole run,
refuses a ts older than the GC safepoint, and is safe to re-trigger after a failure (finished
replicas are skipped, partial ones rewritten). Logic: tidelake.bootstrap.bootstrap_run.
Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param, task

from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.dag_options import DagOptions
from tidelake.orchestration.job_spec import to_json
from tidelake.orchestration.params import bootstrap_job, bootstrap_param_schemas
from tidelake.orchestration.writer_pool import writer_pool


def build(feed: Changefeed, options: DagOptions) -> DAG:
    """The bootstrap DAG of one changefeed, on the factory's bootstrap Spark connection."""
    changefeed_id = feed.config.changefeed_id
    with DAG(
        dag_id=feed.dag_id("bootstrap"),
        description=f"Bootstrap replicas of changefeed {changefeed_id} at one TSO",
        schedule=None,
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        params={name: Param(schema.pop("default"), **schema) for name, schema in bootstrap_param_schemas().items()},
        tags=["tidelake", changefeed_id],
        doc_md=__doc__,
        default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},
    ) as dag:

        @task
        def arguments(config_path: str, **context) -> list[dict]:
            return [{"application_args": [to_json(bootstrap_job(config_path, context["params"]))]}]

        TidelakeSparkOperator.partial(task_id="bootstrap", config_path=feed.config_path, job="bootstrap",
                                      config_conn_id=feed.config_conn_id,
                                      conn_id=options.bootstrap_conn_id, name="tidelake bootstrap",
                                      **writer_pool(feed.config).task_args(exclusive=True),
                                      ).expand_kwargs(arguments(feed.config_path))
    return dag

