"""The merge-metrics textfile: every table's latest merge-log entry, in Prometheus text format."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tidelake import tso
from tidelake.lake.layout import LakeLayout
from tidelake.merge.merge_log import MergeLogEntry, MergeStatus, append_entries, last_entries
from tidelake.merge.merge_metrics import merge_metrics_path, write_merge_metrics

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=timezone.utc)


def entry(key: int, finished: datetime, before: datetime, after: datetime | None, rows_out: int,
          status: MergeStatus = MergeStatus.MERGED) -> MergeLogEntry:
    return MergeLogEntry(
        run_id=f"r{finished}", table_key=key, table_name=f"db.t{key}", status=status,
        checkpoint_before=tso.from_datetime(before), checkpoint_after=None if after is None else tso.from_datetime(after),
        windows=2, ddls_applied=1, rows_in=rows_out + 3, rows_out=rows_out, duration_s=4.5, reason=None,
        started_at=finished - timedelta(seconds=5), finished_at=finished,
    )


def read(path: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    samples = {}
    for family in text_string_to_metric_families(Path(path).read_text()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def test_the_file_holds_each_tables_latest_merge(tmp_path):
    layout = LakeLayout(str(tmp_path))
    first = [entry(1, T0, T0 - timedelta(minutes=9), T0 - timedelta(minutes=5), 10),
             entry(2, T0, T0 - timedelta(minutes=9), T0 - timedelta(minutes=1), 7)]
    append_entries(layout, first)
    # a later group run merges only table 1 (as a mapped merge task does) and fails table 2's retry
    second = [entry(1, T0 + timedelta(minutes=5), T0 - timedelta(minutes=5), T0 + timedelta(minutes=4), 25),
              entry(2, T0 + timedelta(minutes=6), T0 - timedelta(minutes=1), None, 0, MergeStatus.ERROR)]
    append_entries(layout, second)
    path = write_merge_metrics(layout)
    assert path == merge_metrics_path(layout) == str(tmp_path / "_tidelake" / "merge_metrics.prom")
    samples = read(path)
    for e in last_entries(layout).values():
        labels = {"table": e.table_name, "table_key": str(e.table_key)}

        def value(name: str, **extra: str) -> float | None:
            return samples.get((name, tuple(sorted({**labels, **extra}.items()))))

        assert value("tidelake_merge_rows_applied") == e.rows_out
        assert value("tidelake_merge_changes_merged") == e.rows_in
        assert value("tidelake_merge_duration_seconds") == e.duration_s
        assert value("tidelake_merge_finished_time_seconds") == e.finished_at.timestamp()
        assert value("tidelake_merge_status", status=e.status) == 1
        assert sum(value("tidelake_merge_status", status=s) for s in MergeStatus) == 1
        if e.checkpoint_after is None:  # a failed run moved nothing: no checkpoint, no lag
            assert value("tidelake_merge_lag_seconds") is None
            continue
        after = tso.physical_ms(e.checkpoint_after) / 1000
        assert value("tidelake_merge_checkpoint_time_seconds") == after
        assert value("tidelake_merge_lag_seconds") == e.finished_at.timestamp() - after
        assert value("tidelake_merge_window_span_seconds") == after - tso.physical_ms(e.checkpoint_before) / 1000
    assert samples[("tidelake_merge_rows_applied", (("table", "db.t1"), ("table_key", "1")))] == 25
    assert samples[("tidelake_merge_lag_seconds", (("table", "db.t1"), ("table_key", "1")))] == 60.0


def test_an_object_store_lake_gets_no_file():
    assert merge_metrics_path(LakeLayout("s3://bucket/lake")) is None
    assert write_merge_metrics(LakeLayout("s3://bucket/lake")) is None


def test_a_file_uri_root_with_escapes_gets_its_file_in_the_lake_folder(tmp_path):
    """delta-rs escapes a space in a file:// root; the file goes in the folder the URI names."""
    folder = tmp_path / "my lake"
    layout = LakeLayout(folder.as_uri())
    append_entries(layout, [entry(1, T0, T0 - timedelta(minutes=9), T0 - timedelta(minutes=5), 10)])
    path = write_merge_metrics(layout)
    assert path == str(folder / "_tidelake" / "merge_metrics.prom") and os.path.isfile(path)
    assert not (tmp_path / "my%20lake").exists()
