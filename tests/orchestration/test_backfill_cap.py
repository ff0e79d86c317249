"""A run's merge cap: TSO just below its data interval end; none without an interval."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum

from tidelake import tso
from tidelake.orchestration.backfill import interval_cap_ts, run_cap_ts

END = datetime(2026, 3, 1, 0, 5, tzinfo=timezone.utc)


def test_cap_is_the_last_tso_before_the_interval_end():
    cap = interval_cap_ts(END)
    assert tso.physical_ms(cap) == int(END.timestamp() * 1000) - 1
    assert tso.logical(cap) == tso.LOGICAL_MASK
    assert cap + 1 == tso.from_datetime(END)


def test_pendulum_datetimes_from_the_task_context_give_the_same_cap():
    assert interval_cap_ts(pendulum.datetime(2026, 3, 1, 1, 5, tz="Europe/Berlin")) == interval_cap_ts(END)


def test_runs_without_a_data_interval_merge_to_the_latest():
    # Manual runs without a logical date have no data_interval_end key at all in the context.
    assert run_cap_ts({"params": {}}, None) is None
    assert run_cap_ts({}, 12345) == 12345


def test_the_tighter_of_interval_and_requested_cap_wins():
    interval_cap = interval_cap_ts(END)
    earlier = tso.from_datetime(END - timedelta(hours=1))
    assert run_cap_ts({"data_interval_end": END}, earlier) == earlier
    assert run_cap_ts({"data_interval_end": END}, interval_cap + 10) == interval_cap
    assert run_cap_ts({"data_interval_end": END}, None) == interval_cap
