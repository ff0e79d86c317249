"""The merge follower DAG (tidelake_merge_follow), built only with [merge] follow = true: the merge
follower (`tidelake merge --follow`, tidelake.merge.follow) as one long-running Spark job.

@continuous with max_active_runs=1: as soon as a run ends the next starts. Its task runs the
follower for RUN_SECONDS on the Spark of the factory's spark_conn_id (a spark-submit of
spark_jobs/follow_job.py, or in the task against a warm Spark), then lets its pass finish and
succeeds; the next run takes its lease over. While it runs, the scheduled merge DAG leaves the
merge to it. Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG

from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.dag_options import DagOptions
from tidelake.orchestration.job_spec import FollowJob, to_json
from tidelake.orchestration.writer_pool import writer_pool

RUN_SECONDS = 3600.0  # one run of the follower, as long as one of the puller's by default
SHUTDOWN_GRACE = timedelta(minutes=10)  # room for the last pass and the session's teardown after it


def build(feed: Changefeed, options: DagOptions) -> DAG | None:
    """The merge follower DAG of one changefeed; None unless its config asks for it."""
    if not feed.config.merge.follow:
        return None
    changefeed_id = feed.config.changefeed_id
    with DAG(
        dag_id=feed.dag_id("merge_follow"),
        description=f"Merge changefeed {changefeed_id} continuously into the replicas in {feed.config.lake.root}",
        schedule="@continuous",
        max_active_runs=1,
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        tags=["tidelake", changefeed_id],
        doc_md=__doc__,
        default_args={"retries": 3, "retry_delay": timedelta(seconds=30), "retry_exponential_backoff": True,
                      "max_retry_delay": timedelta(minutes=10)},
    ) as dag:
        TidelakeSparkOperator(
            task_id="follow",
            config_path=feed.config_path,
            config_conn_id=feed.config_conn_id,
            job="follow",
            conn_id=options.spark_conn_id,
            name=f"tidelake merge follower {changefeed_id}",
            application_args=[to_json(FollowJob(feed.config_path, RUN_SECONDS))],
            # A wedged follower (a hung Spark step or store call) is killed, its lease then lapses
            # and the scheduled merge runs take over.
            execution_timeout=timedelta(seconds=RUN_SECONDS) + SHUTDOWN_GRACE,
            **writer_pool(feed.config).task_args(exclusive=False),
        )
    return dag
