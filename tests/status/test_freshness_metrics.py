"""The freshness metrics textfile, rewritten by the DAG's merge job after its run (job_entry.run_job,
no Spark: delta-rs merges the small windows on the driver) and by the merge follower while it runs. The merged figure is the commit time
of the first replica version whose checkpoint reaches the change, found here by loading each
version with delta-rs, minus the change's commit ts; a lake whose figures cannot be computed
leaves no file and the merge's outcome as it was."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import recent_change_lake
from prometheus_client.parser import text_string_to_metric_families

from tidelake import tso
from tidelake.config import load_config
from tidelake.lake.layout import LakeLayout
from tidelake.lake.checkpoint import MERGE_APP_ID
from tidelake.lake.replica_catalog import read_entries
from tidelake.merge import merge_run
from tidelake.merge.merge_metrics import merge_metrics_path
from tidelake.orchestration import job_entry
from tidelake.orchestration.job_spec import MergeJob
from tidelake.status import freshness_metrics
from tidelake.status.freshness_metrics import freshness_metrics_path, write_freshness_metrics, write_while_following
from tidelake.status.freshness_tracker import FreshnessTracker


def _samples(path: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(Path(path).read_text()) for s in family.samples}


def _first_version_at(path: str, ts: int) -> int:
    table = DeltaTable(path)
    return next(v for v in range(table.version() + 1)
                if (DeltaTable(path, version=v).transaction_version(MERGE_APP_ID) or -1) >= ts)


@pytest.fixture
def fed(tmp_path):
    lake, commit_ts = recent_change_lake(str(tmp_path / "lake"))
    config = tmp_path / "changefeed.toml"
    config.write_text(f'[changefeed]\nid = "cf"\n[upstream]\npd = ["127.0.0.1:1"]\n[lake]\nroot = "{lake.layout.root}"\n')
    yield lake, commit_ts, config
    lake.close()


def test_the_merge_job_rewrites_the_freshness_metrics_after_its_run(fed):
    lake, commit_ts, config = fed
    path = freshness_metrics_path(lake.layout)
    assert not Path(path).exists()
    job_entry.run_job(MergeJob(str(config)), load_config(config), spark=None)
    samples = _samples(path)
    (entry,) = read_entries(lake.layout).values()
    version = _first_version_at(entry.path, commit_ts)
    merged_ms = next(h["timestamp"] for h in DeltaTable(entry.path).history() if h["version"] == version)
    expected = (merged_ms - tso.physical_ms(commit_ts)) / 1000
    for quantile in ("0.5", "0.95", "0.99"):
        assert samples[("tidelake_freshness_seconds", (("quantile", quantile), ("stage", "merged")))] == pytest.approx(expected)
    assert samples[("tidelake_freshness_max_seconds", (("stage", "merged"),))] == pytest.approx(expected)
    assert samples[("tidelake_freshness_pending_changes", (("stage", "merged"),))] == 0
    assert samples[("tidelake_freshness_changes", ())] == 1
    assert not any(labels and dict(labels).get("stage") == "syncpoint" for _, labels in samples)  # no cuts recorded


def test_figures_that_cannot_be_computed_leave_no_file_and_a_warning(fed, monkeypatch, caplog):
    lake, _, _ = fed

    def broken(*_args, **_kwargs):
        raise OSError("store said no\nsecond line")

    monkeypatch.setattr(freshness_metrics, "collect_freshness", broken)
    with caplog.at_level(logging.WARNING):
        assert write_freshness_metrics(lake.layout) is None
    assert not Path(freshness_metrics_path(lake.layout)).exists()
    (record,) = [r for r in caplog.records if "freshness metrics" in r.getMessage()]
    assert record.getMessage() == "freshness metrics not written: store said no: second line"  # one line, every cause


def test_a_file_younger_than_the_interval_is_kept_and_an_older_one_rewritten(fed, monkeypatch):
    lake, _, _ = fed
    calls = []
    collect = freshness_metrics.collect_freshness
    monkeypatch.setattr(freshness_metrics, "collect_freshness", lambda *a, **k: calls.append(1) or collect(*a, **k))
    path = write_freshness_metrics(lake.layout)
    assert path is not None and len(calls) == 1
    assert write_freshness_metrics(lake.layout) == path and len(calls) == 1  # within the interval: kept
    old = time.time() - freshness_metrics.MIN_INTERVAL_S - 1
    os.utime(path, (old, old))
    assert write_freshness_metrics(lake.layout) == path and len(calls) == 2


def test_the_merge_follower_writes_the_freshness_metrics_while_it_runs(fed, monkeypatch):
    """The follower of `tidelake merge --follow` and of the follow job (job_entry.changefeed_follower)
    rewrites the file on its own thread from its start, and that thread ends with it. The merge
    metrics file is that thread's too, not each pass's (its read of the merge log grows with the
    passes of the last hours)."""
    lake, commit_ts, _ = fed
    path = freshness_metrics_path(lake.layout)
    by_passes = []
    monkeypatch.setattr(merge_run, "write_merge_metrics", by_passes.append)
    stop = threading.Event()
    follower = job_entry.changefeed_follower(None, lake.layout, None, lambda line: None, stop)
    running = threading.Thread(target=follower.run, daemon=True)
    running.start()
    try:
        deadline = time.monotonic() + 20
        while not Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        samples = _samples(path)
    finally:
        stop.set()
        running.join(20)
    assert not running.is_alive()
    assert samples[("tidelake_freshness_changes", ())] == 1
    landed_ms = DeltaTable(lake.layout.changelog).history(1)[0]["timestamp"]
    assert samples[("tidelake_freshness_max_seconds", (("stage", "landed"),))] == pytest.approx(
        (landed_ms - tso.physical_ms(commit_ts)) / 1000)
    assert not [t for t in threading.enumerate() if t.name == "merge-follower-metrics"]
    assert follower.passes >= 1 and by_passes == []
    merged = _samples(merge_metrics_path(lake.layout))  # rewritten once more as the follower stopped
    assert {labels for name, labels in merged if name == "tidelake_merge_checkpoint_time_seconds"}


def test_the_follower_side_warns_on_a_failure_and_writes_nothing_for_an_object_store_lake(fed, monkeypatch, caplog):
    lake, _, _ = fed
    done = threading.Event()

    def broken(self, now_ms=None):
        done.set()  # one try, then the loop ends
        raise OSError("store said no")

    monkeypatch.setattr(FreshnessTracker, "report", broken)
    with caplog.at_level(logging.WARNING):
        write_while_following(lake.layout, done)
    assert "freshness metrics not written: store said no" in caplog.text
    assert not Path(freshness_metrics_path(lake.layout)).exists()
    write_while_following(LakeLayout("s3://bucket/lake"), threading.Event())  # returns at once: no file there
