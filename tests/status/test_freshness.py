"""Freshness per stage on a lake fed through the real lander and merged through delta-rs (no Spark),
local and on an S3 API server.

Each step of the test (a flush, a resolve, a merge, a recorded cut) is one Delta version whose
commit time the test reads itself from that table's history (DeltaTable.history), right after
taking the step; the expected seconds are those times minus the changes' commit ts, which the
test chose. Nothing expected comes from the module under test.
"""

from __future__ import annotations

import itertools
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from deltalake import DeltaTable
from merge.lake_fixtures import FedLake

from tidelake import tso
from tidelake.errors import InputError
from tidelake.lake.delta_commits import DeltaLog
from tidelake.lake.layout import LakeLayout
from tidelake.lake.replica_catalog import read_entries
from tidelake.merge.merge_run import run_merge
from tidelake.status import freshness
from tidelake.status.freshness import STAGES, collect_freshness, parse_span
from tidelake.syncpoint.records import Syncpoint, record_syncpoint

DB = "shop"
STEP_GAP_S = 0.15  # between steps, so that no two stages share a commit time by chance


def _committed(path: str) -> tuple[int, int]:
    """(newest version, its commit time ms) of the Delta table at `path`, from its history."""
    table = DeltaTable(path, storage_options=LakeLayout(path).storage_options)
    (newest,) = table.history(1)
    return table.version(), newest["timestamp"]


def _seconds(at_ms: int, commit_ts: int) -> float:
    return (at_ms - tso.physical_ms(commit_ts)) / 1000


_prefixes = itertools.count()


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path, monkeypatch) -> str:
    """A local lake, or one on an S3 API server (moto) that every reader reaches through the AWS
    variables, as a deployment's processes do (tidelake.lake.object_store)."""
    if request.param == "local":
        return str(tmp_path / "lake")
    server = request.getfixturevalue("s3_server")
    for key, value in {**server.storage_options(), "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(key, value)
    return server.lake_root(f"freshness{next(_prefixes)}")


@pytest.fixture
def fed(root):
    """Two tables; an old change landed and covered before the span; change A on both tables and B
    on t1 in the span, then A and the old change landed again; t1 merged past both, t2 not merged;
    one cut recorded between A and B, leaving t2 out."""
    lake = FedLake(root)
    layout = lake.layout
    now_ms = int(time.time() * 1000)
    lake.up.ts = tso.from_datetime(datetime.now(timezone.utc) - timedelta(minutes=5))
    lake.ddl(lake.up.create_schema(DB))
    for name in ("t1", "t2"):
        lake.ddl(lake.up.create_table(DB, name, [("id", "bigint", "pk"), ("note", "varchar(20)")]))
    lake.resolve(tso.compose(now_ms - 60_000))
    run_merge(None, layout, write_log=False)  # creates both replicas
    with lake.txn(tso.compose(now_ms - 50_000)) as t:  # landed and covered before the span
        t.put(DB, "t1", {"id": 0, "note": "old"})
    old = t.changes
    lake.resolve(tso.compose(now_ms - 45_000))
    time.sleep(STEP_GAP_S)
    span_start_ms = int(time.time() * 1000)
    time.sleep(STEP_GAP_S)

    a_ts, b_ts = tso.compose(now_ms - 40_000), tso.compose(now_ms - 30_000)
    steps: dict[str, tuple[int, int]] = {}
    with lake.txn(a_ts) as a:
        a.put(DB, "t1", {"id": 1, "note": "a"})
        a.put(DB, "t2", {"id": 1, "note": "a"})
    lake.lander.flush()
    steps["landed_a"] = _committed(layout.changelog)
    time.sleep(STEP_GAP_S)
    with lake.txn(b_ts) as t:
        t.put(DB, "t1", {"id": 2, "note": "b"})
    lake.lander.flush()
    steps["landed_b"] = _committed(layout.changelog)
    lake.reland(old + a.changes)  # a replayed puller lands both again: neither is a new change
    lake.lander.flush()
    time.sleep(STEP_GAP_S)
    lake.resolve(tso.compose(now_ms - 35_000))  # covers A, not B
    steps["covered_a"] = _committed(layout.watermarks)
    time.sleep(STEP_GAP_S)
    lake.resolve(tso.compose(now_ms - 20_000))
    steps["covered_b"] = _committed(layout.watermarks)
    time.sleep(STEP_GAP_S)
    entries = {f"{e.db}.{e.name}": e for e in read_entries(layout).values()}
    run_merge(None, layout, tables=[f"{DB}.t1"], until_ts=tso.compose(now_ms - 35_000), write_log=False)
    steps["merged_a"] = _committed(entries[f"{DB}.t1"].path)
    time.sleep(STEP_GAP_S)
    run_merge(None, layout, tables=[f"{DB}.t1"], write_log=False)
    steps["merged_b"] = _committed(entries[f"{DB}.t1"].path)
    time.sleep(STEP_GAP_S)
    record_syncpoint(layout, Syncpoint(tso.compose(now_ms - 35_000), [], {f"{DB}.t2": "stopped"}))  # t2 left out
    steps["cut_a"] = _committed(layout.syncpoints)
    yield lake, span_start_ms, a_ts, b_ts, steps
    lake.close()


def test_stage_times_are_the_commit_times_of_the_first_versions_showing_each_change(fed):
    lake, span_start_ms, a_ts, b_ts, steps = fed
    now_ms = int(time.time() * 1000)
    report = collect_freshness(lake.layout, (now_ms - span_start_ms) / 1000, now_ms=now_ms)
    at = {name: ms for name, (_, ms) in steps.items()}

    assert report.changes == 3  # A on t1 and t2, B on t1; the change landed before the span is not one
    assert report.syncpoints
    t1, t2 = report.tables[f"{DB}.t1"], report.tables[f"{DB}.t2"]
    expected_t1 = {"landed": (_seconds(at["landed_a"], a_ts), _seconds(at["landed_b"], b_ts)),
                   "covered": (_seconds(at["covered_a"], a_ts), _seconds(at["covered_b"], b_ts)),
                   "merged": (_seconds(at["merged_a"], a_ts), _seconds(at["merged_b"], b_ts))}
    for stage, (a, b) in expected_t1.items():
        figures = t1[stage]
        assert (figures.shown, figures.pending) == (2, 0), stage
        assert figures.quantiles[50] == pytest.approx((a + b) / 2), stage
        assert figures.max_s == pytest.approx(max(a, b)), stage
    assert (t1["syncpoint"].shown, t1["syncpoint"].pending) == (1, 1)  # the cut is between A and B
    assert t1["syncpoint"].max_s == pytest.approx(_seconds(at["cut_a"], a_ts))
    assert t1["syncpoint"].oldest_pending_s == pytest.approx(_seconds(now_ms, b_ts))

    assert t2["landed"].max_s == pytest.approx(_seconds(at["landed_a"], a_ts))
    assert t2["covered"].max_s == pytest.approx(_seconds(at["covered_a"], a_ts))
    assert (t2["merged"].shown, t2["merged"].pending) == (0, 1)  # t2 was never merged past A
    assert (t2["syncpoint"].shown, t2["syncpoint"].pending) == (0, 1)  # the cut left t2 out
    assert t2["merged"].quantiles[50] is None
    assert t2["merged"].oldest_pending_s == pytest.approx(_seconds(now_ms, a_ts))

    overall = report.stages
    assert [overall[s].shown + overall[s].pending for s in STAGES] == [3] * len(STAGES)
    assert overall["merged"].max_s == pytest.approx(max(_seconds(at["merged_a"], a_ts), _seconds(at["merged_b"], b_ts)))
    # as the lake stood when B was covered: nothing merged or cut yet
    then = collect_freshness(lake.layout, (at["covered_b"] - span_start_ms) / 1000, now_ms=at["covered_b"])
    assert then.changes == 3 and then.stages["covered"].max_s == report.stages["covered"].max_s
    assert [(then.stages[s].shown, then.stages[s].pending) for s in ("merged", "syncpoint")] == [(0, 3), (0, 3)]

    line = report.summary_line()
    expected_merged = (overall["merged"].quantiles[50], overall["merged"].quantiles[99])
    assert line.startswith(f"3 changes landed in the last {report.span_s:.0f}s: landed p50 ")
    assert f"merged p50 {expected_merged[0]:.1f}s p99 {expected_merged[1]:.1f}s (1 pending)" in line  # t2's A
    assert line.endswith(" (2 pending)") and ", syncpoint p50 " in line  # t1's B after the cut, t2 left out
    # only the versions committed in the span were read: the old change's flush and earlier are not
    assert report.versions_read["changelog"] == _committed(lake.layout.changelog)[0] - steps["landed_a"][0] + 1


def test_a_table_filter_reads_only_that_table(fed):
    lake, span_start_ms, a_ts, _, steps = fed
    now_ms = int(time.time() * 1000)
    report = collect_freshness(lake.layout, (now_ms - span_start_ms) / 1000, tables=[f"{DB}.t2"], now_ms=now_ms)
    assert report.changes == 1
    assert list(report.tables) == [f"{DB}.t2"]
    assert report.stages["landed"].max_s == pytest.approx(_seconds(steps["landed_a"][1], a_ts))
    assert report.versions_read["replicas"] == 0  # t2's replica had no commit in the span
    with pytest.raises(InputError, match="shop.nope"):
        collect_freshness(lake.layout, 60, tables=[f"{DB}.nope"])


def test_spans_parse_with_units_and_bad_ones_are_named():
    assert [parse_span(t) for t in ("90", "90s", "10m", "2h", "0.5m", "1h30m")] == [90, 90, 600, 7200, 30, 5400]
    for bad in ("", "0", "-5m", "ten", "5x", "inf", "nan"):
        with pytest.raises(InputError, match="--since"):
            parse_span(bad)


def _watermarks_with_a_log_cleaned_up_before(tmp_path, first_kept: int, checkpoints_kept: bool) -> tuple[FedLake, Path]:
    """A lake whose watermarks' commit files before `first_kept` are gone (and, unless
    `checkpoints_kept`, the checkpoints before it): as the log's retention leaves it."""
    lake = FedLake(str(tmp_path / "lake"))
    lake.ddl(lake.up.create_schema(DB))
    lake.ddl(lake.up.create_table(DB, "t", [("id", "bigint", "pk")]))
    for i in range(25):
        with lake.txn() as t:
            t.put(DB, "t", {"id": i})
        lake.resolve()
    lake.close()
    log_dir = tmp_path / "lake" / "_tidelake" / "watermarks" / "_delta_log"
    assert (log_dir / f"{19:020d}.checkpoint.parquet").exists()
    for version in range(first_kept):
        (log_dir / f"{version:020d}.json").unlink()
        if not checkpoints_kept:
            (log_dir / f"{version:020d}.checkpoint.parquet").unlink(missing_ok=True)
    return lake, log_dir


@pytest.mark.parametrize(("first_kept", "checkpoints_kept"), [(14, True), (19, False)])
def test_a_span_longer_than_the_watermarks_log_starts_at_its_oldest_loadable_version(tmp_path, first_kept,
                                                                                    checkpoints_kept):
    """The watermarks' log is kept an hour: the versions before the oldest one that loads cannot
    say what was covered, so the span is cut there rather than counting every change as covered
    at that version. Here that is the checkpoint at 19: with the commit files before 14 cleaned
    up, or with those before 19 and the checkpoints before it (19 is then the span's first commit
    and loads from its own checkpoint, the version before it not at all)."""
    lake, log_dir = _watermarks_with_a_log_cleaned_up_before(tmp_path, first_kept, checkpoints_kept)
    table = DeltaTable(str(log_dir.parent))
    kept_ms = next(h["timestamp"] for h in table.history() if h["version"] == 19)
    now_ms = int(time.time() * 1000)

    report = collect_freshness(lake.layout, 3600, now_ms=now_ms)

    assert report.span_s == pytest.approx((now_ms - kept_ms) / 1000)
    assert 0 < report.changes < 25  # only the changes landed since that version
    assert report.stages["covered"].pending == 0


def test_flushes_that_name_their_changes_are_not_read_and_agree_with_their_files(fed, monkeypatch):
    """The lander names each flush's changes in its commit (tidelake.lake.flush_stamps): figures
    come from the log alone, and equal those from the files, which commits of older releases need."""
    lake, span_start_ms, _, _, _ = fed
    ms = int(time.time() * 1000) - 2_000
    for ts in (tso.compose(ms), tso.compose(ms, 1)):  # one file holding two commit ts
        with lake.txn(ts) as t:
            t.put(DB, "t2", {"id": 10 + tso.logical(ts), "note": "two in a file"})
    lake.lander.flush()
    now_ms = int(time.time() * 1000)
    span_s = (now_ms - span_start_ms) / 1000
    read_file, changelog_reads = DeltaLog.read_file, []

    def counted(self, path, columns):
        if self.path == lake.layout.changelog:
            changelog_reads.append(path)
        return read_file(self, path, columns)

    monkeypatch.setattr(DeltaLog, "read_file", counted)
    named = collect_freshness(lake.layout, span_s, now_ms=now_ms).to_json()
    assert changelog_reads == []
    monkeypatch.setattr(freshness, "stamps_of", lambda info, where="": None)
    from_files = collect_freshness(lake.layout, span_s, now_ms=now_ms).to_json()
    assert changelog_reads  # the file of two commit ts at least
    assert named == from_files and named["changes"] == 5
