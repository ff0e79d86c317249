"""The freshness tracker (tidelake.status.freshness_tracker) on a lake fed through the real lander
and merged through delta-rs (no Spark): over several calls, its figures are collect_freshness's
over the same span, and the per-change seconds are the commit times of the versions the test
took (read from each table's history) minus the commit ts the test chose; each call reads only
the log versions and data files committed since the previous one."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import shop_lake

from tidelake import tso
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.merge.merge_run import run_merge
from tidelake.status import freshness
from tidelake.status.freshness import collect_freshness
from tidelake.status.freshness_tracker import FreshnessTracker
from tidelake.syncpoint.records import Syncpoint, record_syncpoint

SPAN_S = 30.0
STEP_GAP_S = 0.05  # between steps, so that no two share a commit time


def _committed(path: str) -> tuple[int, int]:
    """(newest version, its commit time ms) of the Delta table at `path`, from its history."""
    table = DeltaTable(path)
    (newest,) = table.history(1)
    return table.version(), newest["timestamp"]


def _seconds(at_ms: int, commit_ts: int) -> float:
    return (at_ms - tso.physical_ms(commit_ts)) / 1000


def _same(tracked, checked) -> None:
    """Every figure of the two reports equal (not the versions each read)."""
    tracked, checked = tracked.to_json(), checked.to_json()
    tracked.pop("versions_read"), checked.pop("versions_read")
    assert tracked == checked


class Reads:
    """Every log version and data file DeltaLog reads, per call of the tracker."""

    def __init__(self, monkeypatch) -> None:
        self.versions: Counter[tuple[str, int]] = Counter()
        self.files: Counter[tuple[str, str]] = Counter()
        commit, read_file = DeltaLog.commit, DeltaLog.read_file

        def counted_commit(log, version):
            self.versions[(log.path, version)] += 1
            return commit(log, version)

        def counted_read_file(log, path, columns):
            self.files[(log.path, path)] += 1
            return read_file(log, path, columns)

        monkeypatch.setattr(DeltaLog, "commit", counted_commit)
        monkeypatch.setattr(DeltaLog, "read_file", counted_read_file)

    def call(self, tracker: FreshnessTracker, now_ms: int | None = None):
        """tracker.report(now_ms), with the versions and files it read (then cleared)."""
        self.versions.clear()
        self.files.clear()
        report = tracker.report(now_ms)
        return report, dict(self.versions), dict(self.files)


@pytest.mark.parametrize("named", [True, False], ids=["flushes-name-their-changes", "changelog-files-read"])
def test_calls_keep_collect_freshness_figures_reading_only_what_was_committed_since(tmp_path, monkeypatch, named):
    if not named:  # flushes of an older release, or above flush_stamps.MAX_STAMPS
        monkeypatch.setattr(freshness, "stamps_of", lambda info, where="": None)
    lake = shop_lake(str(tmp_path / "lake"), ("t1", "t2"))
    layout = lake.layout
    now_ms = int(time.time() * 1000)
    lake.resolve(tso.compose(now_ms - 60_000))
    run_merge(None, layout, write_log=False)  # creates both replicas
    replica = {name: ReplicaCatalog(layout).find("shop", name).path for name in ("t1", "t2")}
    reads = Reads(monkeypatch)
    tracker = FreshnessTracker(layout, SPAN_S)
    logs = {"changelog": layout.changelog, "watermarks": layout.watermarks, "syncpoints": layout.syncpoints, **replica}
    newest: dict[str, int | None] = dict.fromkeys(logs)  # None: not called yet (the first call reads the span)

    def call(at_ms: int | None = None):
        """A call of the tracker, checked against collect_freshness at the same time; what it read
        of each log it followed is only the versions after those the previous call saw (one past
        the newest may be probed, and is read again once written); no data file is read twice."""
        at_ms = int(time.time() * 1000) if at_ms is None else at_ms
        report, versions, files = reads.call(tracker, at_ms)
        _same(report, collect_freshness(layout, SPAN_S, now_ms=at_ms))
        for name, path in logs.items():
            read = [v for (p, v) in versions if p == path]
            assert newest[name] is None or not read or min(read) > newest[name], (name, read, newest[name])
            newest[name] = _committed(path)[0] if DeltaTable.is_deltatable(path) else -1
            if name in replica and f"shop.{name}" not in report.tables:
                newest[name] = None  # a replica is followed once its table has a change in the span
        assert all(n == 1 for n in files.values()), files
        assert not set(files) & seen_files, set(files) & seen_files
        seen_files.update(files)
        return report

    seen_files: set[tuple[str, str]] = set()
    first = call()
    assert first.changes == 0

    a_ts, b_ts = tso.compose(now_ms - 40_000), tso.compose(now_ms - 30_000)
    with lake.txn(a_ts) as a:
        a.put("shop", "t1", {"id": 1, "note": "a"})
        a.put("shop", "t2", {"id": 1, "note": "a"})
    with lake.txn(tso.compose(now_ms - 33_000)) as t:  # C: landed with A, covered with B
        t.put("shop", "t2", {"id": 3, "note": "c"})
    lake.lander.flush()
    landed_a = _committed(layout.changelog)[1]
    time.sleep(STEP_GAP_S)
    lake.resolve(tso.compose(now_ms - 35_000))  # covers A
    covered_a = _committed(layout.watermarks)[1]
    time.sleep(STEP_GAP_S)
    run_merge(None, layout, tables=["shop.t1"], write_log=False)
    merged_a = _committed(replica["t1"])[1]
    time.sleep(STEP_GAP_S)
    report = call()
    assert report.changes == 3
    t1, t2 = report.tables["shop.t1"], report.tables["shop.t2"]
    assert t1["landed"].max_s == pytest.approx(_seconds(landed_a, a_ts))
    assert t1["covered"].max_s == pytest.approx(_seconds(covered_a, a_ts))
    assert t1["merged"].max_s == pytest.approx(_seconds(merged_a, a_ts))
    assert (t2["merged"].shown, t2["merged"].pending) == (0, 2)  # t2 not merged yet
    assert (t2["covered"].shown, t2["covered"].pending) == (1, 1)  # C is above that watermark
    assert not report.syncpoints

    with lake.txn(b_ts) as b:
        b.put("shop", "t1", {"id": 2, "note": "b"})
    lake.lander.flush()
    landed_b = _committed(layout.changelog)[1]
    lake.reland(a.changes)  # a replayed puller lands A again: not a new change
    lake.lander.flush()
    time.sleep(STEP_GAP_S)
    lake.resolve(tso.compose(now_ms - 25_000))
    covered_b = _committed(layout.watermarks)[1]
    time.sleep(STEP_GAP_S)
    run_merge(None, layout, write_log=False)
    merged_b = _committed(replica["t1"])[1]
    time.sleep(STEP_GAP_S)
    record_syncpoint(layout, Syncpoint(tso.compose(now_ms - 25_000), [], {"shop.t2": "stopped"}))
    cut = _committed(layout.syncpoints)[1]
    report = call()
    assert report.changes == 4 and report.syncpoints
    t1 = report.tables["shop.t1"]
    assert t1["merged"].max_s == pytest.approx(max(_seconds(merged_a, a_ts), _seconds(merged_b, b_ts)))
    assert t1["syncpoint"].max_s == pytest.approx(_seconds(cut, a_ts))
    assert (report.tables["shop.t2"]["syncpoint"].shown, report.tables["shop.t2"]["syncpoint"].pending) == (0, 2)

    # Later, the span starting at B's landing: A's and C's first landing, A's cover and merge
    # fell out of it; A landed again within it is no change (its table covered it before the
    # span), nor is C, covered within it.
    later = call(landed_b + int(SPAN_S * 1000))
    assert later.changes == 1
    t1 = later.tables["shop.t1"]
    expected = {"landed": landed_b, "covered": covered_b, "merged": merged_b, "syncpoint": cut}
    for stage, at_ms in expected.items():
        assert (t1[stage].shown, t1[stage].pending) == (1, 0), stage
        assert t1[stage].max_s == pytest.approx(_seconds(at_ms, b_ts)), stage
    assert "shop.t2" not in later.tables
    if named:  # every flush named its changes: the tracker read no changelog file
        assert not [path for log, path in seen_files if log == layout.changelog]
    lake.close()


def test_a_call_after_a_gap_longer_than_the_span_starts_over(tmp_path):
    lake = shop_lake(str(tmp_path / "lake"), ("t1",))
    now_ms = int(time.time() * 1000)
    with lake.txn(tso.compose(now_ms - 10_000)) as t:
        t.put("shop", "t1", {"id": 1, "note": "a"})
    lake.resolve(tso.compose(now_ms - 5_000))
    lake.close()
    tracker = FreshnessTracker(lake.layout, SPAN_S)
    assert tracker.report().changes == 1
    much_later = int(time.time() * 1000) + int(SPAN_S * 1000) * 3
    again = tracker.report(much_later)
    assert again.changes == 0
    assert again.versions_read["changelog"] == 0 and again.versions_read["watermarks"] == 0
    _same(again, collect_freshness(lake.layout, SPAN_S, now_ms=much_later))
