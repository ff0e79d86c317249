"""The puller DAG (tidelake_puller): the always-on puller of each changefeed, one task per puller shard.

@continuous with max_active_runs=1: as soon as a run ends the next starts. Each shard's task
runs the puller in-process for a bounded time (the factory's pull_run_seconds, default 1 h), then
flushes and succeeds; SIGTERM (a worker shutdown, a cleared task) flushes too. The next run
resumes from the durable watermarks in the lake. Logic: tidelake.orchestration.airflow.puller_operator.
Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, Param

from tidelake.orchestration.airflow.puller_operator import PullerOperator
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.config_record import PARAM, config_record
from tidelake.orchestration.dag_options import DagOptions


def build(feed: Changefeed, options: DagOptions) -> DAG:
    """The puller DAG of one changefeed, one mapped task per shard; its param
    config_record.PARAM tells the api-server where the changefeed's config is."""
    shards = feed.config.puller.shards
    record = config_record(feed)
    with DAG(
        dag_id=feed.dag_id("puller"),
        description=f"Pull TiKV changes of changefeed {feed.config.changefeed_id} into {feed.config.lake.root}",
        schedule="@continuous",
        max_active_runs=1,
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        tags=["tidelake", feed.config.changefeed_id],
        doc_md=__doc__,
        params={PARAM: Param(record, const=record, description="where the Replication page reads the config")},
        default_args={"retries": 3, "retry_delay": timedelta(seconds=30), "retry_exponential_backoff": True,
                      "max_retry_delay": timedelta(minutes=10)},
    ) as dag:
        PullerOperator.partial(
            task_id="pull",
            config_path=feed.config_path,
            config_conn_id=feed.config_conn_id,
            max_run_seconds=options.pull_run_seconds,
            map_index_template="shard {{ task.shard }}",
        ).expand(shard=[f"{i}/{shards}" for i in range(shards)])
    return dag
