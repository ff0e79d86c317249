"""A job spec (tidelake.orchestration.job_spec) run: under spark-submit by spark_jobs/, or in an
Airflow task against a warm Spark (Spark Connect, docs/operations.md#warm-spark). Either way the same
stage call: the merge, a syncpoint, maintenance or a bootstrap, on the config with the upstream
the Airflow task resolved from [upstream].connection (tidelake.orchestration.upstream_handoff).
Bad input is an InputError (the task fails without retries); a job that ran and did not do its
work is JobFailed (retried).
Owner: spark_jobs/ and the DAGs' warm-Spark tasks.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from tidelake.bootstrap.bootstrap_run import Bootstrap, BootstrapOptions
from tidelake.config import ChangefeedConfig, MergeConfig, load_config
from tidelake.consumers.iceberg.iceberg_catalog import open_catalog
from tidelake.consumers.iceberg.retention import lake_retention
from tidelake.consumers.iceberg.sync import sync_iceberg
from tidelake.errors import InputError, TidelakeError
from tidelake.lake.layout import LakeLayout
from tidelake.maintenance.lake_upkeep import run_maintenance
from tidelake.merge.follow import FOLLOW_THREADS, Follower, FollowOptions
from tidelake.merge.merge_run import run_merge
from tidelake.merge.table_plan import DEFAULT_CHUNK_ROWS
from tidelake.orchestration.job_spec import (
    BootstrapJob,
    FollowJob,
    JobSpec,
    MaintenanceJob,
    MergeJob,
    SyncpointJob,
    from_json,
)
from tidelake.orchestration.merge_dag import follower_line
from tidelake.orchestration.upstream_handoff import received_upstream
from tidelake.spark.spark_session import get_session, release_session
from tidelake.status.freshness_metrics import write_freshness_metrics, write_while_following
from tidelake.stop_signals import stop_on_signals
from tidelake.syncpoint.cut import SyncpointOutcome, run_syncpoint
from tidelake.syncpoint.follow_cut import FollowerCuts

log = logging.getLogger(__name__)


class JobFailed(TidelakeError):
    """The job ran and did not do its work: a table failed or was stopped, a cut was not taken."""


def spark_submit_main(kind: str, argv: Sequence[str]) -> int:
    """spark_jobs/<kind>_job.py: the spec is the one argument, the session spark-submit's; the exit
    code is what spark-submit reports (0 done, 1 failed, 2 bad input)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if len(argv) != 1:
            raise InputError(f"spark_jobs/{kind}_job.py takes one argument, a {kind} job spec (JSON); got {len(argv)}")
        spec = from_json(argv[0], kind)
        config = _config(spec)
        run_job(spec, config, get_session(f"tidelake-{kind}", local=False, lake=LakeLayout.from_config(config.lake)))
    except TidelakeError as exc:
        print(f"tidelake {kind}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def run_on_warm_spark(spec_json: str, remote: str) -> None:
    """An Airflow task's job against the Spark Connect server at `remote`."""
    spec = from_json(spec_json)
    config = _config(spec)
    # No child process: Connect mode is process-wide, but Airflow 3 forks a process per task, none runs classic Spark
    spark = get_session(f"tidelake-{spec.kind}", remote=remote, lake=LakeLayout.from_config(config.lake))
    try:
        run_job(spec, config, spark)
    finally:
        release_session(spark)


def changefeed_follower(spark: SparkSession, layout: LakeLayout, config: ChangefeedConfig | None,
                        say: Callable[[str], None], stop: threading.Event, threads: int = FOLLOW_THREADS,
                        max_chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Follower:
    """The merge follower of `layout`'s lake as `config` asks (None: a lake named by path, no
    syncpoints, the defaults): its poll, its syncpoints and their Iceberg publication, as the
    syncpoint job publishes them, and its metrics writer (docs/operations.md#metrics).
    The follow job's and `tidelake merge --follow`'s."""
    merge = config.merge if config is not None else MergeConfig()
    publish: Callable[[], list[str]] | None = None
    if config is not None and config.iceberg.enabled:
        def publish_to_iceberg() -> list[str]:
            result = sync_iceberg(open_catalog(layout, config.iceberg), layout)
            return [p.line() for p in result.published] + list(result.refused.values())
        publish = publish_to_iceberg
    cuts = FollowerCuts(layout, merge.syncpoint_interval_s, publish) if merge.syncpoint_interval_s else None
    options = FollowOptions(poll_s=merge.follow_poll_s, threads=threads, max_chunk_rows=max_chunk_rows,
                            history_config=config.history if config is not None else None)
    return Follower(spark, layout, options, say, cuts, stop,
                    metrics=lambda done: write_while_following(layout, done))


def run_follower(spark: SparkSession, layout: LakeLayout, config: ChangefeedConfig, run_seconds: float | None) -> None:
    """The follow job: the follower until `run_seconds` have passed or SIGTERM (under spark-submit,
    where this is the main thread), then its pass finished and its leases released; the merge
    follower DAG starts the next run at once (@continuous)."""
    with stop_on_signals((signal.SIGTERM,)) as stop:
        timer = threading.Timer(run_seconds, stop.set) if run_seconds is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            changefeed_follower(spark, layout, config, lambda line: log.info("%s", line), stop).run()
        finally:
            if timer is not None:
                timer.cancel()


def _config(spec: JobSpec) -> ChangefeedConfig:
    """The spec's changefeed config; for a job that dials PD, with the upstream its task handed over."""
    config = load_config(spec.config)
    return received_upstream(config) if spec.dials_pd else config


def run_job(spec: JobSpec, config: ChangefeedConfig, spark: SparkSession) -> None:
    """Run `spec` of the changefeed `config` in `spark`; JobFailed when it did not do its work."""
    layout = LakeLayout.from_config(config.lake)
    if isinstance(spec, MergeJob):
        report = run_merge(spark, layout, tables=list(spec.tables) or None, until_ts=spec.until_ts,
                           rebuild=spec.rebuild, history_config=config.history,
                           progress=lambda p: log.info("%s %s: %s (checkpoint %s)", p.table, p.kind, p.detail,
                                                       p.checkpoint))
        for table in report.tables:
            log.info("%s: %s, checkpoint %s, %d windows, %d DDLs, %d changes%s", table.table, table.status,
                     table.checkpoint_after, table.windows, table.ddls_applied, table.rows_in,
                     f" ({table.reason})" if table.reason else "")
        write_freshness_metrics(layout)  # docs/operations.md#metrics
        if report.failed:
            raise JobFailed(f"merge run {report.run_id[:8]}: " + "; ".join(f"{t.table} {t.status}: {t.reason}"
                                                                           for t in report.failed))
    elif isinstance(spec, SyncpointJob):
        interval = config.merge.syncpoint_interval_s
        if interval is None:
            raise InputError(f"{spec.config}: no [merge].syncpoint_interval, so no syncpoint to take")
        follower = follower_line(layout)
        if follower is not None:  # it takes the cuts (and publishes them) itself
            log.info("%s", follower)
            return
        result = run_syncpoint(spark, layout, interval)
        if result.outcome is SyncpointOutcome.HELD:  # another writer's run: the next interval takes the cut
            log.warning("syncpoint %s not taken now: %s", result.ts, result.reason)
        elif result.outcome not in (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.NO_ROOM):
            log.info("syncpoint %s: %s%s", result.ts, result.outcome, f" ({result.reason})" if result.reason else "")
        # After the Delta cut, whatever this attempt made of it: the cuts recorded before still publish
        # (as `tidelake syncpoint` does); a catalog that fails leaves the cut as it is.
        if config.iceberg.enabled:
            iceberg = sync_iceberg(open_catalog(layout, config.iceberg), layout, on_publish=lambda p: log.info(p.line()))
            for line in iceberg.refused.values():
                log.warning("%s", line)
        if result.outcome in (SyncpointOutcome.INCOMPLETE, SyncpointOutcome.NO_ROOM):  # a full store fails the task
            raise JobFailed(f"syncpoint {result.ts} not taken: {result.reason}")
    elif isinstance(spec, MaintenanceJob):
        kept = lake_retention(layout, config.iceberg)
        for expired in kept.expired:
            log.info("expired Iceberg tag %s", expired)
        report = run_maintenance(spark, layout, vacuum_holds=kept.holds)
        for line in report.held.values():
            log.info("%s", line)
        log.info("maintenance: %d changelog rows and %d merge-log rows deleted, %d tables optimized, %d vacuumed "
                 "(%s)", report.changelog_rows_deleted, report.merge_log_rows_deleted, len(report.optimized),
                 len(report.vacuumed), report.by_engine())
        for reason in report.skipped.values():
            log.warning("maintenance skipped: %s", reason)
    elif isinstance(spec, FollowJob):
        run_follower(spark, layout, config, spec.run_seconds)
    elif isinstance(spec, BootstrapJob):
        bootstrap = Bootstrap(config, BootstrapOptions(at_ts=spec.at_ts, tables=spec.tables), spark=spark)
        results = bootstrap.run()
        written = [r for r in results if r.how != "skipped"]
        bootstrap.say(f"done: {len(written)} replicas written, {len(results) - len(written)} already there")
