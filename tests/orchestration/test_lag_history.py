"""Lag sparkline data from the merge log: lag after each merge, per table, oldest first."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.lake.merge_log import MergeLogEntry, MergeStatus, append_entries
from tidelake.orchestration.lag_history import lag_history

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)


def entry(key, finished, checkpoint_at, status=MergeStatus.MERGED):
    return MergeLogEntry(
        run_id=f"r{finished}", table_key=key, table_name=f"db.t{key}", status=status,
        checkpoint_before=None, checkpoint_after=None if checkpoint_at is None else tso.from_datetime(checkpoint_at),
        windows=1, ddls_applied=0, rows_in=1, rows_out=1, duration_s=1.0, reason=None,
        started_at=finished - timedelta(seconds=1), finished_at=finished,
    )


def test_lag_after_each_merge_oldest_first_and_limited(tmp_path):
    layout = LakeLayout(str(tmp_path))
    assert lag_history(layout) == {}
    append_entries(layout, [entry(1, T0 + timedelta(minutes=5), T0 + timedelta(minutes=4, seconds=30)),
                            entry(2, T0 + timedelta(minutes=5), T0)])
    append_entries(layout, [entry(1, T0, T0 - timedelta(seconds=20)),
                            entry(1, T0 + timedelta(minutes=10), None, MergeStatus.ERROR)])
    history = lag_history(layout)
    assert history == {1: [20.0, 30.0], 2: [300.0]}
    assert lag_history(layout, limit=1)[1] == [30.0]
