"""Retention drops only whole buckets at or below each table's checkpoint."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tidelake.capture.landing.changelog_retention import delete_merged_changelog, vacuum_changelog
from tidelake.capture.landing.changelog_writer import ChangelogWriter
from tidelake.tso import compose

HOUR = 3_600_000


def test_deletes_buckets_below_each_checkpoint_only(layout, make_rows, base_ms):
    rows = (make_rows(1, 2, at_ms=base_ms) + make_rows(1, 2, at_ms=base_ms + HOUR)
            + make_rows(1, 2, at_ms=base_ms + 2 * HOUR) + make_rows(2, 2, at_ms=base_ms))
    ChangelogWriter(layout, "tidelake-puller/cf").append(rows, seq=1)
    files_before = set(DeltaTable(layout.changelog).file_uris())
    # Table 1 merged to the middle of the second hour: only the first hour goes.
    # Table 2 merged nothing of its bucket: kept. Table 3 has no data.
    deleted = delete_merged_changelog(
        layout, {1: compose(base_ms + HOUR + 30 * 60_000), 2: compose(base_ms), 3: 1 << 60}
    )
    assert deleted == 2
    left = DeltaTable(layout.changelog).to_pyarrow_table()
    assert sorted(zip(left["table_id"].to_pylist(), left["commit_ts"].to_pylist())) == sorted(
        (r.table_id, r.commit_ts) for r in rows[2:])
    assert set(DeltaTable(layout.changelog).file_uris()) < files_before  # no file rewritten


def test_checkpoint_at_the_last_ts_of_a_bucket_drops_it(layout, make_rows, base_ms):
    rows = make_rows(1, 1, at_ms=base_ms)
    ChangelogWriter(layout, "tidelake-puller/cf").append(rows, seq=1)
    end_of_bucket = compose(base_ms + HOUR) - 1
    assert delete_merged_changelog(layout, {1: end_of_bucket - 1}) == 0
    assert delete_merged_changelog(layout, {1: end_of_bucket}) == 1


def test_nothing_to_do_without_changelog(layout):
    assert delete_merged_changelog(layout, {1: 5}) == 0


@pytest.mark.parametrize(("retention_hours", "hours", "full", "enforced"), [
    (0, 0, False, False),  # only the log's tombstones: a listing would take a flush's uncommitted files
    (0.5, 1, True, False),  # rounded up to whole hours, and the full vacuum decided on those
    (1, 1, True, False),
    (168, 168, True, True),
])
def test_the_changelog_vacuum_lists_the_folder_from_one_whole_hour_of_retention(retention_hours, hours, full,
                                                                               enforced):
    asked = []

    class Changelog:
        def vacuum(self, retention, dry_run, full, enforce_retention_duration):
            asked.append((retention, dry_run, full, enforce_retention_duration))

    vacuum_changelog(Changelog(), retention_hours)
    assert asked == [(hours, False, full, enforced)]
