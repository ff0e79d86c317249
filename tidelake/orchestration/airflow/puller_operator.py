"""PullerOperator: one puller shard run in the Airflow task process itself, so SIGTERM reaches the
puller (it flushes and exits cleanly) and the task's process is the puller's own (its RSS counts
against the quota, the allocator settings of `tidelake pull` apply).
Owner: the puller DAG (tidelake.orchestration.airflow.dags.puller).

More: docs/internals.md#puller_operator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator

from tidelake.capture.changefeed.process_memory import tune_allocators, warn_jemalloc_too_late
from tidelake.config import ChangefeedConfig, load_config
from tidelake.failpoints import check_env_names
from tidelake.orchestration.airflow.hooks.aws_lake import lake_connection
from tidelake.orchestration.airflow.hooks.config_source import refresh_config
from tidelake.orchestration.airflow.hooks.tidb_pd import TiDBPDHook
from tidelake.orchestration.airflow.task_errors import input_errors_fail_the_task

# Room for the final flush and the PD/TiKV connection teardown after the run-length limit.
SHUTDOWN_GRACE = timedelta(minutes=10)

log = logging.getLogger(__name__)


@contextmanager
def connected_upstream(config: ChangefeedConfig) -> Iterator[ChangefeedConfig]:
    """The config with [upstream].connection replaced by that tidb_pd connection's endpoints and TLS
    (its PEM files live while the block runs); a config naming PD endpoints is unchanged."""
    if config.upstream.connection is None:
        yield config
        return
    with TiDBPDHook(config.upstream.connection).upstream(config.upstream.gc_ttl_s) as upstream:
        yield replace(config, upstream=upstream)


class PullerOperator(BaseOperator):
    """Pull shard `shard` ("I/N") of the changefeed in `config_path` (written from connection
    `config_conn_id` when given) for `max_run_seconds`."""

    template_fields = ("config_path", "shard")
    ui_color = "#cfe8fc"

    def __init__(self, *, config_path: str, shard: str, max_run_seconds: int, config_conn_id: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("execution_timeout", timedelta(seconds=max_run_seconds) + SHUTDOWN_GRACE)
        super().__init__(**kwargs)
        self.config_path = config_path
        self.config_conn_id = config_conn_id
        self.shard = shard
        self.max_run_seconds = max_run_seconds
        self._runner = None

    def execute(self, context: Any) -> dict[str, Any]:
        with input_errors_fail_the_task():  # a bad config or TIDELAKE_FAILPOINTS: one line, no retries
            return self._pull()

    def _pull(self) -> dict[str, Any]:
        # The task process runs nothing but this shard: the allocator settings of `tidelake pull`
        # apply here too, before the runner's imports (jemalloc reads them when deltalake loads).
        if tune_allocators():
            warn_jemalloc_too_late("the puller task")
        from tidelake.capture.changefeed.puller_runner import PullerRunner, RunOptions, Shard
        from tidelake.capture.landing.lander import LANDER_FAILPOINTS

        check_env_names(LANDER_FAILPOINTS, "the puller task")
        refresh_config(self.config_conn_id)
        with connected_upstream(load_config(self.config_path)) as config, lake_connection(config.lake):
            shard = Shard.parse(self.shard)
            self._runner = PullerRunner(
                config,
                shard,
                # Airflow runs each task in a process of its own, so the memory quota also holds the process's
                # RSS growth back, as under `tidelake pull` (tidelake.capture.landing.resident_memory).
                RunOptions(max_run_s=float(self.max_run_seconds),
                           metrics_port=config.puller.metrics_port_of(shard.index), watch_rss=True),
                progress=lambda p: log.info(
                    "%d tables, %d rows (%.0f/s), %.1f MiB (%.2f MiB/s), DDL lag %.1fs, max table lag %.1fs, "
                    "buffer %.1f MiB",
                    p.tables, p.rows, p.rows_per_s, p.bytes / 2**20, p.mib_per_s, p.ddl_lag_s,
                    max(p.table_lag_s.values(), default=0.0),
                    p.buffered_bytes / 2**20,
                ),
            )
            summary = self._runner.run()
            log.info("stopped after %d rows (%.1f MiB) and %d DDL jobs; DDL resolved ts %d", summary.rows,
                     summary.bytes / 2**20, summary.jobs, summary.ddl_resolved)
            return {"rows": summary.rows, "bytes": summary.bytes, "ddl_jobs": summary.jobs,
                    "ddl_resolved_ts": summary.ddl_resolved, "tables": len(summary.table_resolved)}

    def on_kill(self) -> None:
        """SIGTERM or a task timeout: flush and return instead of dying mid-batch."""
        if self._runner is not None:
            self._runner.stop()
