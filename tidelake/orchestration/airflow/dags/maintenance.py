"""The maintenance DAG (tidelake_maintenance): daily upkeep of each changefeed's lake with Spark.

spark_jobs/maintenance_job.py compacts (OPTIMIZE) and vacuums the replicas and drops changelog
partitions every replica has merged past (changelog retention). It runs when merges are light
(TIDELAKE_MAINTENANCE_SCHEDULE, default 03:00 UTC), as a thin Spark Connect client when a warm
Spark is configured (tidelake.orchestration.job_entry). On an s3 lake it takes the whole replica
writers' pool of the changefeed (tidelake.orchestration.writer_pool), so it never runs beside a
merge: Spark's S3 log store has no conditional PUT and two Spark commits of one replica version
could overwrite each other.
Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, task

from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection_of
from tidelake.orchestration.airflow.schedules import (
    DEFAULT_MAINTENANCE_SCHEDULE,
    timetable,
)
from tidelake.orchestration.airflow.spark_operator import TidelakeSparkSubmitOperator
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.job_spec import MaintenanceJob, to_json
from tidelake.orchestration.spark_submit import SparkSettings, job_remote, spark_submit_kwargs
from tidelake.orchestration.writer_pool import writer_pool


def build(feed: Changefeed) -> DAG:
    """The maintenance DAG of one changefeed; settings from the environment are read at each parse."""
    with DAG(
        dag_id=feed.dag_id("maintenance"),
        description=f"OPTIMIZE/VACUUM replicas and changelog retention of {feed.config.lake.root}",
        schedule=timetable("TIDELAKE_MAINTENANCE_SCHEDULE", DEFAULT_MAINTENANCE_SCHEDULE),
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        tags=["tidelake", feed.config.changefeed_id],
        doc_md=__doc__,
        default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    ) as dag:
        remote = job_remote(feed.config)
        pool = writer_pool(feed.config).task_args(exclusive=True)
        if remote is None:
            TidelakeSparkSubmitOperator(
                task_id="maintenance",
                config_path=feed.config_path,
                **pool,
                **spark_submit_kwargs(
                    SparkSettings.from_env(),
                    job="maintenance",
                    app_name=f"tidelake maintenance {feed.config.changefeed_id}",
                    lake=feed.config.lake,
                    application_args=[to_json(MaintenanceJob(feed.config_path))],
                ),
            )
        else:

            @task(task_id="maintenance", **pool)
            def maintenance_remote(config_path: str, remote: str = remote) -> None:
                # Spark loads in the task, never where the DAG file is parsed
                from tidelake.orchestration.job_entry import run_on_warm_spark

                with input_errors_fail_the_task(), lake_connection_of(config_path):
                    run_on_warm_spark(to_json(MaintenanceJob(config_path)), remote)

            maintenance_remote(feed.config_path)
    return dag
