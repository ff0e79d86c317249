"""The merge cap of a run: what a run with a data interval may merge up to.

A scheduled or backfill run of tidelake_merge covers a data interval [start, end); its replicas
then reflect the upstream as of `end`: changes committed before end, i.e. TSO up to
TSO(end) - 1. That makes a backfill reproduce the lake at each interval boundary (a syncpoint
and an asset event per interval). A run without a logical date (manual trigger, asset trigger)
has no data interval, and Airflow then leaves `data_interval_end` out of the task context
(docs/stack.md#airflow-scheduling), so it merges to the latest watermarks.
Owner: the merge DAG (tidelake.orchestration.merge_dag).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tidelake import tso


def interval_cap_ts(data_interval_end: datetime | None) -> int | None:
    """Largest TSO strictly before the interval end; None when the run has no interval."""
    if data_interval_end is None:
        return None
    return tso.from_datetime(data_interval_end) - 1


def run_cap_ts(context: Mapping[str, Any], requested_until_ts: int | None) -> int | None:
    """The tighter of the run's interval cap and the user's until_ts / until_time."""
    caps = [c for c in (interval_cap_ts(context.get("data_interval_end")), requested_until_ts) if c is not None]
    return min(caps) if caps else None
