"""read_watermarks folds the pullers' partitions conservatively."""

from __future__ import annotations

import json
from pathlib import Path

from deltalake import DeltaTable

from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.lake.watermarks import Watermarks, read_watermarks


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


def test_a_long_history_is_read_from_a_recent_checkpoint(layout):
    """A read replays at most 10 commits, however many flushes the puller made."""
    writer = WatermarkWriter(layout, "tidelake-puller/a")
    for seq in range(1, 36):
        writer.write({1: 100 + seq, 2: 200 + seq}, seq, changelog_version=seq, ddl_version=0, seq=seq)
    log = Path(layout.watermarks) / "_delta_log"
    last_checkpoint = json.loads((log / "_last_checkpoint").read_text())["version"]
    latest = DeltaTable(layout.watermarks).version()
    assert latest - last_checkpoint <= 10
    assert read_watermarks(layout).table_resolved == {1: 135, 2: 235}


def test_a_watermarks_table_of_an_earlier_version_gets_the_current_properties(tmp_path):
    from deltalake import DeltaTable

    from tidelake.capture.landing.watermark_writer import WatermarkWriter
    from tidelake.lake.layout import WATERMARKS_PARTITIONS, WATERMARKS_PROPERTIES, WATERMARKS_SCHEMA, LakeLayout

    layout = LakeLayout(str(tmp_path))
    DeltaTable.create(layout.watermarks, WATERMARKS_SCHEMA, partition_by=list(WATERMARKS_PARTITIONS))
    assert not DeltaTable(layout.watermarks).metadata().configuration
    WatermarkWriter(layout, "p0")
    configuration = DeltaTable(layout.watermarks).metadata().configuration
    assert {k: configuration.get(k) for k in WATERMARKS_PROPERTIES} == WATERMARKS_PROPERTIES
