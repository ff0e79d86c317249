"""Schedules of the periodic tidelake DAGs, the DAG factory's arguments (DagOptions).

Both are data-interval timetables on purpose: a run then covers [start, end) and caps its
merge at TSO(end) - 1 (backfill.py), which is what makes `airflow backfill create` reproduce
the replicas at each interval boundary. Airflow's default for cron strings would be a trigger
timetable whose interval has zero length (docs/stack.md#airflow-scheduling).
Owner: the merge and maintenance DAGs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, DeltaDataIntervalTimetable
from croniter import croniter  # Airflow's own cron parser

from tidelake.config import parse_duration
from tidelake.errors import InputError


def timetable(argument: str, text: str) -> Any:
    """A cron expression ('*/5 * * * *') or a duration ('5m', '1h30m'), the value of `argument`."""
    text = text.strip()
    if len(text.split()) >= 5 or text.startswith("@"):
        if not croniter.is_valid(text):
            raise InputError(f"{argument}: {text!r} is not a valid cron expression")
        return CronDataIntervalTimetable(text, timezone="UTC")
    try:
        seconds = parse_duration(text)
    except ValueError:
        raise InputError(f"{argument}: expected a cron expression like '*/5 * * * *' or a duration like '5m', got {text!r}") from None
    return DeltaDataIntervalTimetable(timedelta(seconds=seconds))
