"""read_watermarks folds the pullers' partitions conservatively."""

from __future__ import annotations

from tidelake.lake.watermarks import Watermarks, WatermarkWriter, read_watermarks


def test_empty_lake_has_no_watermarks(layout):
    assert read_watermarks(layout) == Watermarks({}, 0, -1)


def test_each_puller_owns_its_partition(layout):
    a, b = WatermarkWriter(layout, "tidelake-puller/a"), WatermarkWriter(layout, "tidelake-puller/b")
    a.write({1: 100, 2: 200}, 90, changelog_version=5, ddl_version=2, seq=1)
    b.write({3: 300}, 95, changelog_version=7, ddl_version=1, seq=1)
    a.write({1: 110, 2: 210}, 99, changelog_version=8, ddl_version=2, seq=2)
    wm = read_watermarks(layout)
    assert wm.table_resolved == {1: 110, 2: 210, 3: 300}
    assert wm.ddl_resolved == 95  # the DDL history is complete only up to the slowest DDL puller
    assert wm.changelog_version == 8
    assert wm.ddl_version == 2
    assert a.load().table_resolved == {1: 110, 2: 210}


def test_a_table_claimed_twice_takes_the_lower_watermark(layout):
    WatermarkWriter(layout, "tidelake-puller/a").write({1: 100}, 0, 1, 0, seq=1)
    WatermarkWriter(layout, "tidelake-puller/b").write({1: 80}, 0, 1, 0, seq=1)
    assert read_watermarks(layout).table_resolved == {1: 80}


def test_replayed_sequence_is_skipped(layout):
    writer = WatermarkWriter(layout, "tidelake-puller/a")
    assert writer.write({1: 100}, 0, 1, 0, seq=1)
    assert not writer.write({1: 50}, 0, 1, 0, seq=1)
    assert read_watermarks(layout).table_resolved == {1: 100}
