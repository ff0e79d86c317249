"""The merge DAG of one changefeed: plan, merge (Spark jobs, mapped), syncpoint, publish (DOC).

Owner: the DAG factory (tidelake.orchestration.airflow.dag_factory).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import (
    DAG,
    Asset,
    AssetAlias,
    AssetOrTimeSchedule,
    AssetWatcher,
    Metadata,
    Param,
    TriggerRule,
    task,
)

from tidelake.orchestration import merge_dag
from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection_of, with_lake_connection
from tidelake.orchestration.airflow.hooks.config_source import refresh_config
from tidelake.orchestration.airflow.new_data_trigger import NewDataTrigger
from tidelake.orchestration.airflow.schedules import timetable
from tidelake.orchestration.airflow.spark_operator import TidelakeSparkOperator
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task
from tidelake.orchestration.assets import (
    ASSET_GROUP,
    asset_event_extra,
    changelog_asset_uri,
    iceberg_catalog_asset_uri,
    merge_alias_name,
    replica_asset_uri,
)
from tidelake.orchestration.changefeeds import Changefeed
from tidelake.orchestration.dag_options import DagOptions
from tidelake.orchestration.job_spec import SyncpointJob, to_json
from tidelake.orchestration.params import merge_param_schemas
from tidelake.orchestration.writer_pool import writer_pool

DOC = """tidelake_merge: advance every replica to min(resolved ts, barrier ts, run cap) with Spark.

plan (validate params, plan tables, group them) -> merge (one spark-submit of
spark_jobs/merge_job.py per table group, mapped, each with its job spec) -> [syncpoint_due -> syncpoint] -> publish (an asset
event per replica that got a new commit, extra = {checkpoint_ts, delta_version}).

Each Spark job gets one job spec from the plan (tidelake.orchestration.job_spec), run on the Spark
of the factory's spark_conn_id: a spark-submit for a `spark` connection, in the task as a thin
Spark Connect client for a `spark_connect` one (a warm Spark; tidelake.orchestration.airflow.spark_operator).

With [merge].syncpoint_interval in the changefeed config, merges stop at the next syncpoint
boundary and a run that asks for everything (no tables, until or dry_run; not a backfill) then
runs spark_jobs/syncpoint_job.py: every replica to one aligned TSO, recorded as a cross-table cut
(`tidelake snapshot-at TS`). [merge].parallel_jobs is the default of the groups param.

Schedule: the factory's merge_schedule, a cron expression or a duration (default every 5 minutes).
With [merge].run_on_new_data in the changefeed config, also a run whenever the changelog got
changes its watermarks cover, at most one per that interval: an asset watched by a trigger in the
triggerer (tidelake.orchestration.airflow.new_data_trigger).
A scheduled or backfill run merges only changes committed before its data interval end, so
`airflow backfill create --dag-id tidelake_merge --from-date ... --to-date ...` reproduces the
replicas interval by interval; a manual run without a logical date merges to the latest.
Trigger params: tables, until_ts or until_time, rebuild (one table replayed from its CREATE into a
new replica, refused unless the changelog still holds all its changes), dry_run, groups. Logic:
tidelake.orchestration.merge_dag.
"""  # the DAG's doc_md, shown in the UI

log = logging.getLogger(__name__)


def schedule(feed: Changefeed, options: DagOptions):
    """The cron timetable, or it OR the changelog asset when runs may also start on new data."""
    cron = timetable("merge_schedule", options.merge_schedule)
    floor_s = feed.config.merge.run_on_new_data_s
    if floor_s is None:
        return cron
    changefeed_id = feed.config.changefeed_id
    watcher = AssetWatcher(name=f"tidelake-new-data-{changefeed_id}",
                           trigger=NewDataTrigger(config_path=feed.config_path, floor_s=floor_s))
    changelog = Asset(uri=changelog_asset_uri(changefeed_id), group=ASSET_GROUP, watchers=[watcher])
    return AssetOrTimeSchedule(timetable=cron, assets=changelog)


def table_choices(feed: Changefeed) -> list[str]:
    """merge_dag.table_choices, the lake read with its [lake].aws_conn_id connection; that connection
    missing or wrong gives no suggestions and a warning, as an unreachable lake does (the DAG still
    parses; its tasks fail on it in one line)."""
    try:
        config = with_lake_connection(feed.config)
    except Exception as exc:  # noqa: BLE001 - a secrets backend's error must not unparse every changefeed's DAGs
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        log.warning("%s: cannot list the lake's tables for the trigger form: %s", feed.config.lake.root, first)
        return []
    return merge_dag.table_choices(config)


def submitted(job: dict) -> dict:
    """A planned merge job as the spark-submit task's arguments: its spec is the one argument."""
    return {"application_args": [job["spec"]], "name": job["name"]}


def build(feed: Changefeed, options: DagOptions) -> DAG:
    """The merge DAG of one changefeed."""
    changefeed_id = feed.config.changefeed_id
    schemas = merge_param_schemas(table_choices(feed), feed.config.merge.parallel_jobs)
    alias = AssetAlias(merge_alias_name(changefeed_id))
    with DAG(
        dag_id=feed.dag_id("merge"),
        description=f"Merge changefeed {changefeed_id} into the replicas in {feed.config.lake.root}",
        schedule=schedule(feed, options),
        start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
        catchup=False,
        max_active_runs=1,
        params={name: Param(schema.pop("default"), **schema) for name, schema in schemas.items()},
        tags=["tidelake", changefeed_id],
        doc_md=DOC,
        default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    ) as dag:

        @task
        def plan(config_path: str, **context) -> list[dict]:
            with input_errors_fail_the_task():
                refresh_config(feed.config_conn_id)
            with input_errors_fail_the_task(), lake_connection_of(config_path):
                planned = merge_dag.plan_run(config_path, context["params"], context)
            context["ti"].xcom_push(key="before", value=planned["before"])
            context["ti"].xcom_push(key="syncpoint", value=planned["syncpoint"])
            return planned["merge_jobs"]

        # After the merges and the syncpoint whatever they did (none planned, a merge follower
        # running, one failed, a table stopped): what was committed since the last announcement is
        # announced, whoever committed it. The `succeeded` task, not this one, fails the run.
        @task(outlets=[alias], trigger_rule=TriggerRule.ALL_DONE)
        def publish(config_path: str, **context):
            before = context["ti"].xcom_pull(task_ids="plan", key="before")
            if before is None:
                log.info("the plan task failed: nothing to compare with, nothing announced")
                return
            with input_errors_fail_the_task():
                refresh_config(feed.config_conn_id)
            with input_errors_fail_the_task(), lake_connection_of(config_path):
                changed = merge_dag.announce_after_run(config_path, before)
            for table, state in changed.items():
                asset = Asset(uri=replica_asset_uri(changefeed_id, table), group=ASSET_GROUP)
                yield Metadata(asset, extra=asset_event_extra(state), alias=alias)

        planned = plan(feed.config_path)
        pool = writer_pool(feed.config)
        merged = TidelakeSparkOperator.partial(
            task_id="merge", map_index_template="{{ task.name }}", config_path=feed.config_path, job="merge",
            config_conn_id=feed.config_conn_id,
            conn_id=options.spark_conn_id, **pool.task_args(exclusive=False),
        ).expand_kwargs(planned.map(submitted))
        published = publish(feed.config_path)
        merged >> published
        # A leaf that succeeds only when the plan, every merge and the syncpoint did (or had nothing
        # to do): Airflow judges a run by its leaves, and publish runs after failures too.
        succeeded = EmptyOperator(task_id="succeeded", trigger_rule=TriggerRule.ALL_SUCCESS)
        merged >> succeeded
        if feed.config.merge.syncpoint_interval_s is not None:

            @task.short_circuit(trigger_rule=TriggerRule.NONE_FAILED, ignore_downstream_trigger_rules=False)
            def syncpoint_due(**context) -> bool:
                """After every merge succeeded (or none was needed), if plan said this run takes one;
                skips the syncpoint only, not the publish after it."""
                return bool(context["ti"].xcom_pull(task_ids="plan", key="syncpoint"))

            # With [iceberg] enabled the syncpoint job publishes the cut to the catalog: its asset
            # gets an event when the task succeeds.
            outlets = ([Asset(uri=iceberg_catalog_asset_uri(feed.config), group=ASSET_GROUP)]
                       if feed.config.iceberg.enabled else [])
            syncpoint = TidelakeSparkOperator(
                task_id="syncpoint",
                config_path=feed.config_path,
                config_conn_id=feed.config_conn_id,
                job="syncpoint",
                conn_id=options.spark_conn_id,
                name=f"tidelake syncpoint {changefeed_id}",
                application_args=[to_json(SyncpointJob(feed.config_path))],
                outlets=outlets,
                **pool.task_args(exclusive=True),
            )
            merged >> syncpoint_due() >> syncpoint >> [published, succeeded]
    return dag

