"""The maintenance DAG (tidelake_maintenance): daily upkeep of each changefeed's lake with Spark.

spark_jobs/maintenance_job.py compacts (OPTIMIZE) and vacuums the replicas and drops changelog
partitions every replica has merged past (changelog retention), when merges are light (the
factory's maintenance_schedule, default 03:00 UTC), on the Spark of its spark_conn_id
(tidelake.orchestration.airflow.spark_operator). On an s3 lake it takes the whole replica writers'
pool of the changefeed (tidelake.orchestration.writer_pool), never running beside a merge: Spark's
S3 log store has no conditional PUT and two Spark commits of one replica version could collide.
Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG

from tidelake.orchestration.airflow.schedules import timetable
from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.dag_options import DagOptions
from tidelake.orchestration.job_spec import MaintenanceJob, to_json
from tidelake.orchestration.writer_pool import writer_pool


def build(feed: Changefeed, options: DagOptions) -> DAG:
    """The maintenance DAG of one changefeed."""
    with DAG(
        dag_id=feed.dag_id("maintenance"),
        description=f"OPTIMIZE/VACUUM replicas and changelog retention of {feed.config.lake.root}",
        schedule=timetable("maintenance_schedule", options.maintenance_schedule),
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        tags=["tidelake", feed.config.changefeed_id],
        doc_md=__doc__,
        default_args={"retries": 1, "retry_delay": timedelta(minutes=10)},
    ) as dag:
        TidelakeSparkOperator(
            task_id="maintenance",
            config_path=feed.config_path,
            config_conn_id=feed.config_conn_id,
            job="maintenance",
            conn_id=options.spark_conn_id,
            name=f"tidelake maintenance {feed.config.changefeed_id}",
            application_args=[to_json(MaintenanceJob(feed.config_path))],
            **writer_pool(feed.config).task_args(exclusive=True),
        )
    return dag
