"""What a deployment may change in a changefeed's DAGs without code: the DAG factory's keyword
arguments (tidelake.orchestration.airflow.dag_factory.changefeed_dags), checked once, each bad one
an InputError line naming the argument (that DAG file's import error).
Owner: the DAG factory; the DAG builders read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidelake.errors import InputError
from tidelake.orchestration.spark_submit import DEFAULT_CONN_ID

DEFAULT_MERGE_SCHEDULE = "*/5 * * * *"
DEFAULT_MAINTENANCE_SCHEDULE = "0 3 * * *"
DEFAULT_PULL_RUN_SECONDS = 3600


@dataclass(frozen=True)
class DagOptions:
    """`spark_conn_id`: the Spark of the merge, syncpoint and maintenance tasks, a `spark`
    (spark-submit) or `spark_connect` connection; `bootstrap_spark_conn_id`: the bootstrap's (it
    needs classic Spark), default the same; the schedules: a cron expression or a duration ('5m');
    `pull_run_seconds`: how long one puller task runs before it flushes and the next run starts."""

    spark_conn_id: str = DEFAULT_CONN_ID
    bootstrap_spark_conn_id: str | None = None
    merge_schedule: str = DEFAULT_MERGE_SCHEDULE
    maintenance_schedule: str = DEFAULT_MAINTENANCE_SCHEDULE
    pull_run_seconds: int = DEFAULT_PULL_RUN_SECONDS

    def __post_init__(self) -> None:
        for name in ("spark_conn_id", "bootstrap_spark_conn_id", "merge_schedule", "maintenance_schedule"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InputError(f"{name}: expected a non-empty string, got {value!r}")
        if isinstance(self.pull_run_seconds, bool) or not isinstance(self.pull_run_seconds, int) \
                or self.pull_run_seconds < 1:
            raise InputError(f"pull_run_seconds: expected a whole number of seconds >= 1, got {self.pull_run_seconds!r}")

    @property
    def bootstrap_conn_id(self) -> str:
        return self.bootstrap_spark_conn_id or self.spark_conn_id
