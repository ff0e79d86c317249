"""A flush's (physical table, commit ts) pairs round-trip through its commitInfo entry."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidelake.lake import flush_stamps
from tidelake.lake.flush_stamps import STAMPS_KEY, stamps_metadata, stamps_of

pairs = st.lists(st.tuples(st.integers(1, 1 << 40), st.integers(1, (1 << 63) - 1)), max_size=200)


@given(pairs)
def test_the_entry_names_each_distinct_pair_once(landed):
    want: dict[int, list[int]] = {}
    for table_id, ts in sorted(set(landed)):
        want.setdefault(table_id, []).append(ts)
    assert stamps_of(stamps_metadata(landed)) == (want if landed else {})


def test_steps_keep_the_entry_short():
    base = 463_000_000_000_000_000
    entry = stamps_metadata((7, base + step * 1_310_720) for step in range(1000))  # a ts each 5 ms
    assert len(entry[STAMPS_KEY]) < 10 * 1000
    assert json.loads(entry[STAMPS_KEY])["7"][:2] == [base, 1_310_720]


def test_past_the_cap_the_tables_with_the_most_pairs_are_left_out_whole(monkeypatch):
    monkeypatch.setattr(flush_stamps, "MAX_STAMPS", 3)
    assert stamps_of(stamps_metadata([(1, 10), (1, 10), (2, 10), (1, 11), (1, 10)])) == {1: [10, 11], 2: [10]}
    assert stamps_of(stamps_metadata([(1, 10), (2, 10), (1, 11), (2, 12), (2, 13)])) == {1: [10, 11]}
    assert stamps_of(stamps_metadata([(2, 10), (2, 12), (2, 13), (2, 14)])) == {}  # named: none of them
    assert stamps_of({}) is None and stamps_of({"tidelake.app": "x"}) is None


def test_a_flush_of_many_pairs_holds_few_while_collecting_and_names_the_quietest_tables(monkeypatch):
    monkeypatch.setattr(flush_stamps, "MAX_STAMPS", 4)
    busy = [(9, ts) for ts in range(100, 140)]  # over twice the cap on its own: left out early
    quiet = [(table_id, 7) for table_id in (1, 2, 3)]
    assert stamps_of(stamps_metadata(busy[:20] + quiet + busy[20:])) == {1: [7], 2: [7], 3: [7]}
    many = [(table_id, 7) for table_id in range(1, 30)]  # 29 tables of one pair each
    named = stamps_of(stamps_metadata(many))
    assert len(named) == 4 and all(stamps == [7] for stamps in named.values())


def test_at_the_real_cap_a_flush_of_1000_tables_is_named_whole_and_one_busier_table_left_out():
    """MAX_STAMPS as shipped: 1,000 tables of 10 transactions each fill it; a table of 50 more pairs
    pushes the flush past it and is the one left out, while every other pair is named."""
    base = 463_000_000_000_000_000
    quiet = [(table_id, base + n * 262_144 + table_id) for n in range(10) for table_id in range(1, 1001)]
    busy = [(5000, base + n) for n in range(1, 51)]
    assert len(quiet) == flush_stamps.MAX_STAMPS
    named = stamps_of(stamps_metadata(busy[:25] + quiet + busy[25:]))
    want: dict[int, list[int]] = {}
    for table_id, ts in sorted(quiet):
        want.setdefault(table_id, []).append(ts)
    assert named == want


@pytest.mark.parametrize("value", ["not json", '["7", 1]', '{"seven": [1]}', '{"7": 5}', '{"7": ["x"]}', "7",
                                   '{"7": "12"}', '{"7": [1.5]}', '{"7": [true]}', '{"7": [5, -1]}', '{"7": []}'])
def test_an_entry_this_release_cannot_read_is_a_warning_and_no_stamps(value, caplog):
    assert stamps_of({STAMPS_KEY: value}, "changelog version 12") is None
    assert f"changelog version 12 has an unreadable {STAMPS_KEY} entry" in caplog.text
