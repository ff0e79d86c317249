"""bench/_freshness_stages.py: each change gets the commit time of the first version that shows it
at each stage, in seconds from its own upstream commit; a stage that never showed it is missing."""

from __future__ import annotations

import pytest

from bench._freshness_stages import Change, Reach, first_landing, out_of_order, stage_seconds, summarize
from tidelake import tso

BASE_MS = 1_700_000_000_000


def ts(offset_ms: int, logical: int = 0) -> int:
    return tso.compose(BASE_MS + offset_ms, logical)


def at(offset_ms: int) -> int:
    return BASE_MS + offset_ms


def test_reach_is_the_first_version_at_or_above_even_when_a_later_value_dips():
    # a watermark read from two pullers may step back while a table moves; the first version
    # that showed the value counts, not a later one
    reach = Reach([(at(100), ts(0)), (at(200), ts(500)), (at(300), ts(400)), (at(400), ts(900))])
    assert reach.first_at_or_above(ts(0)) == at(100)
    assert reach.first_at_or_above(ts(1)) == at(200)  # a logical tick past the first value
    assert reach.first_at_or_above(ts(450)) == at(200)
    assert reach.first_at_or_above(ts(501)) == at(400)
    assert reach.first_at_or_above(ts(901)) is None
    assert Reach([]).first_at_or_above(ts(0)) is None and len(reach) == 4


def test_first_landing_keeps_the_earliest_version_of_each_commit_ts():
    landed = first_landing([(at(10), []), (at(20), [ts(1), ts(2)]), (at(30), [ts(2), ts(3)]),
                            (at(40), [ts(1)])])  # a later compaction rewrites old rows
    assert landed == {ts(1): at(20), ts(2): at(20), ts(3): at(30)}


def test_stage_seconds_per_change_and_missing_stages():
    first = Change("t0", 1, "insert", ts(1000))
    second = Change("t1", 7, "delete", ts(2000, 3))
    landed = {first.commit_ts: at(1500), second.commit_ts: at(2600)}
    covered = {"t0": Reach([(at(1400), ts(900)), (at(2100), ts(1800))]), "t1": Reach([(at(2900), ts(2500))])}
    merged = {"t0": Reach([(at(5000), ts(1800))])}  # t1's replica never reached its change
    cuts = Reach([(at(9000), ts(1000))])

    assert stage_seconds(first, landed, covered, merged, cuts) == pytest.approx(
        {"landed": 0.5, "covered": 1.1, "merged": 4.0, "syncpoint": 8.0})
    assert stage_seconds(second, landed, covered, merged, cuts) == pytest.approx(
        {"landed": 0.6, "covered": 0.9, "merged": None, "syncpoint": None})
    assert stage_seconds(first, {}, {}, {}, None) == {"landed": None, "covered": None, "merged": None,
                                                       "syncpoint": None}


def test_summarize_counts_missing_changes_and_takes_percentiles_of_the_rest():
    per_change = [{"landed": float(s), "covered": float(s), "merged": None if s == 4 else 2.0 * s, "syncpoint": None}
                  for s in range(1, 6)]
    summary = summarize(per_change)
    assert summary["landed"] == {"changes": 5, "missing": 0, "p50": 3.0, "p95": pytest.approx(4.8),
                                 "p99": pytest.approx(4.96), "max": 5.0}
    assert summary["merged"]["changes"] == 4 and summary["merged"]["missing"] == 1
    assert summary["merged"]["max"] == 10.0 and summary["merged"]["p50"] == 5.0  # of 2, 4, 6, 10
    assert summary["syncpoint"] == {"changes": 0, "missing": 5, "p50": None, "p95": None, "p99": None, "max": None}


def test_out_of_order_counts_changes_a_later_stage_showed_first():
    per_change = [{"landed": 0.5, "covered": 0.7, "merged": 2.0, "syncpoint": 9.0},
                  {"landed": 0.5, "covered": None, "merged": 0.4, "syncpoint": None},  # merged before landed
                  {"landed": 0.5, "covered": 0.5, "merged": None, "syncpoint": None},
                  {"landed": 0.6, "covered": 0.9, "merged": 3.0, "syncpoint": 2.5}]  # cut before the merge
    assert out_of_order(per_change) == 2
