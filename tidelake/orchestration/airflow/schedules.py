"""Schedules of the periodic tidelake DAGs, configurable per deployment without code changes.

Both are data-interval timetables on purpose: a run then covers [start, end) and caps its
merge at TSO(end) - 1 (backfill.py), which is what makes `airflow backfill create` reproduce
the replicas at each interval boundary. Airflow's default for cron strings would be a trigger
timetable whose interval has zero length (docs/stack.md#airflow-scheduling).
Owner: the merge and maintenance DAGs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, DeltaDataIntervalTimetable
from croniter import croniter  # Airflow's own cron parser

from tidelake.config import parse_duration
from tidelake.errors import InputError

DEFAULT_MERGE_SCHEDULE = "*/5 * * * *"
DEFAULT_MAINTENANCE_SCHEDULE = "0 3 * * *"


def timetable(variable: str, default: str, env: Mapping[str, str] | None = None) -> Any:
    """A cron expression ('*/5 * * * *') or a duration ('5m', '1h30m') from `variable`."""
    env = os.environ if env is None else env
    text = env.get(variable, "").strip() or default
    if len(text.split()) >= 5 or text.startswith("@"):
        if not croniter.is_valid(text):
            raise InputError(f"{variable}: {text!r} is not a valid cron expression")
        return CronDataIntervalTimetable(text, timezone="UTC")
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise InputError(f"{variable}: expected a cron expression like '*/5 * * * *' or a duration like '5m', got {text!r}") from None
    return DeltaDataIntervalTimetable(timedelta(seconds=seconds))
