"""Chart data from a real merge log: lag after each merge per table, and throughput per run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.merge.merge_log import RECENT, MergeLogEntry, MergeStatus, append_entries
from tidelake.orchestration.merge_history import LagPoint, merge_history

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)


def entry(key, finished, checkpoint_at, status=MergeStatus.MERGED, run="r", rows=1, seconds=1.0):
    return MergeLogEntry(
        run_id=run, table_key=key, table_name=f"db.t{key}", status=status,
        checkpoint_before=None, checkpoint_after=None if checkpoint_at is None else tso.from_datetime(checkpoint_at),
        windows=1, ddls_applied=0, rows_in=rows, rows_out=rows, duration_s=seconds, reason=None,
        started_at=finished - timedelta(seconds=seconds), finished_at=finished,
    )


def test_lag_after_each_merge_oldest_first_and_limited(tmp_path):
    layout = LakeLayout(str(tmp_path))
    assert merge_history(layout).lag() == {} and merge_history(layout).runs == []
    five, ten = T0 + timedelta(minutes=5), T0 + timedelta(minutes=10)
    append_entries(layout, [entry(1, five, T0 + timedelta(minutes=4, seconds=30), run="b"),
                            entry(2, five, T0, run="b")])
    append_entries(layout, [entry(1, T0, T0 - timedelta(seconds=20), run="a"),
                            entry(1, ten, None, MergeStatus.ERROR, run="c")])
    history = merge_history(layout)
    assert history.lag() == {1: [LagPoint(T0, 20.0), LagPoint(five, 30.0)], 2: [LagPoint(five, 300.0)]}
    assert merge_history(layout, points=1).lag()[1] == [LagPoint(five, 30.0)]


def test_run_throughput_is_changes_over_the_runs_wall_time(tmp_path):
    layout = LakeLayout(str(tmp_path))
    # Two tables merged in parallel within one 10 s run; a later run of one table.
    append_entries(layout, [entry(1, T0 + timedelta(seconds=10), T0, run="a", rows=300, seconds=10),
                            entry(2, T0 + timedelta(seconds=8), T0, run="a", rows=100, seconds=4)])
    append_entries(layout, [entry(1, T0 + timedelta(minutes=1), T0, run="b", rows=50, seconds=5)])
    runs = merge_history(layout).runs
    assert [(r.run_id, r.tables, r.changes, r.seconds) for r in runs] == [("a", 2, 400, 10.0), ("b", 1, 50, 5.0)]
    assert runs[0].changes_per_s == 40.0
    assert [r.run_id for r in merge_history(layout, runs=1).runs] == ["b"]


def test_many_runs_over_many_tables_match_a_plain_recount(tmp_path):
    """Runs appended out of finish order, errors without a checkpoint: the last points per table
    and the last runs, recounted here row by row."""
    import random

    layout = LakeLayout(str(tmp_path))
    rng = random.Random(5)
    finishes = rng.sample(range(1, 5000), 30)
    written = []
    for run, at in enumerate(finishes):
        finished = T0 + timedelta(seconds=at)
        batch = [entry(key, finished - timedelta(milliseconds=rng.randrange(0, 900)),
                       None if rng.random() < 0.2 else finished - timedelta(seconds=rng.randrange(0, 600)),
                       run=f"r{run}", rows=rng.randrange(0, 50), seconds=rng.randrange(1, 9))
                 for key in rng.sample(range(12), 7)]
        append_entries(layout, batch)
        written += batch
    history = merge_history(layout, points=4, runs=5)
    expected_lag = {}
    for e in sorted(written, key=lambda e: e.finished_at):
        if e.checkpoint_after is not None:
            lag = max((e.finished_at - tso.to_datetime(e.checkpoint_after)).total_seconds(), 0.0)
            expected_lag.setdefault(e.table_key, []).append(LagPoint(e.finished_at, lag))
    assert history.lag() == {k: v[-4:] for k, v in expected_lag.items()}
    assert history.recent_lags() == {k: [p.lag_s for p in v[-4:]] for k, v in expected_lag.items()}
    some = sorted(expected_lag)[::3]
    assert history.lag(some) == {k: expected_lag[k][-4:] for k in some}
    by_run = {}
    for e in written:
        by_run.setdefault(e.run_id, []).append(e)
    expected_runs = sorted(((max(e.finished_at for e in es), run, min(e.started_at for e in es),
                             len({e.table_key for e in es}), sum(e.rows_in for e in es))
                            for run, es in by_run.items()))[-5:]
    assert [(r.finished_at, r.run_id, r.started_at, r.tables, r.changes) for r in history.runs] == expected_runs


def test_only_the_recent_merge_log_is_shown_and_the_window_says_so(tmp_path):
    layout = LakeLayout(str(tmp_path))
    old, new = T0 - RECENT - timedelta(minutes=1), T0
    append_entries(layout, [entry(1, old, old - timedelta(seconds=5), run="old")])
    append_entries(layout, [entry(1, new, new - timedelta(seconds=7), run="new")])
    history = merge_history(layout)
    assert history.lag() == {1: [LagPoint(new, 7.0)]} and [r.run_id for r in history.runs] == ["new"]
    assert history.window_json() == {"since": (new - RECENT).isoformat(), "until": new.isoformat(),
                                     "hours": RECENT.total_seconds() / 3600}


def test_the_charted_tables_are_those_with_the_highest_last_lag(tmp_path):
    """What the page report gives every table (its recent lags) picks the tables the chart draws:
    recounted from the entries written, the highest lag after each table's last merge."""
    import random

    from tidelake.orchestration.page_report import charted_tables

    layout = LakeLayout(str(tmp_path))
    rng = random.Random(11)
    last = {}
    for run in range(4):
        finished = T0 + timedelta(minutes=run)
        batch = [entry(key, finished, finished - timedelta(seconds=rng.randrange(0, 900)), run=f"r{run}")
                 for key in range(20)]
        append_entries(layout, batch)
        last.update({e.table_key: (e.finished_at - tso.to_datetime(e.checkpoint_after)).total_seconds() for e in batch})
    recent = merge_history(layout).recent_lags()
    tables = [{"table_key": key, "lag_recent": recent.get(key, [])} for key in range(25)]  # 20..24: never merged
    worst = sorted(last, key=lambda k: (-last[k], k))[:5]
    assert [t["table_key"] for t in charted_tables(tables, limit=5)] == worst
