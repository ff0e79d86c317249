"""Syncpoints: every table merged exactly to one aligned S, the cut recorded once, read back by
`replicas_at` and `tidelake snapshot-at`. The merge is a stand-in that commits the txn the real
merge would (delta-rs, no Spark), so these tests exercise the choice of S and the bookkeeping."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lake.ddl_jobs import DdlFeed, Upstream

from tests.lake.tiny_fs import fill, grow, tiny_tmpfs
from tidelake import tso
from tidelake.capture.landing.app_txn import commit_properties
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.cli import main
from tidelake.errors import EXIT_TRY_LATER, InputError
from tidelake.failpoints import armed
from tidelake.lake.checkpoint import (
    MERGE_APP_ID,
    checkpoint_at_version,
    read_checkpoint,
)
from tidelake.codec.ddl_job import ActionType
from tidelake.lake.ddl_log import DdlRow
from tidelake.lake.layout import DdlSource, LakeLayout
from tidelake.lake.replica_catalog import ReplicaCatalog
from tidelake.lake.schema_history import SchemaHistory
from tidelake.lake.watermarks import Watermarks
from tidelake.merge.merge_log import MergeStatus
from tidelake.merge.merge_run import MergeReport
from tidelake.merge.table_merge import TableResult
from tidelake.syncpoint.cut import SyncpointOutcome, run_syncpoint
from tidelake.syncpoint.records import read_syncpoints
from tidelake.syncpoint.records import boundary_at_or_below, merge_cap, next_boundary, replicas_at

INTERVAL_S = 10
SCHEMA = pa.schema([pa.field("id", pa.int64())])


def _commit(path, ts):
    write_deltalake(path, pa.table({"id": [ts]}, schema=SCHEMA), mode="append",
                    commit_properties=commit_properties(MERGE_APP_ID, ts))


class Lake:
    """Two replicated tables, their replicas at their create ts, watermarks set by the test."""

    def __init__(self, root):
        self.layout = LakeLayout(str(root))
        self.up = Upstream(ts=tso.compose(1_800_000_000_000))
        self.up.create_schema("shop")
        self.up.create_table("shop", "a", [("id", "bigint", "pk")])
        self.up.create_table("shop", "b", [("id", "bigint", "pk")])
        self.feed = DdlFeed(self.up)
        self.catalog = ReplicaCatalog(self.layout)
        self.seq = 0
        self.merges: list[tuple[list[str], int]] = []
        self.held: dict[str, str] = {}
        self.no_room: dict[str, str] = {}
        self.flush_ddl()
        for key in SchemaHistory(self.feed.rows).tables():
            event = SchemaHistory(self.feed.rows).ddl_events(key)[0]
            entry = self.catalog.assign(key, event.db, event.name, event.commit_ts)
            _commit(entry.path, event.commit_ts)

    def flush_ddl(self):
        self.seq += 1
        DdlWriter(self.layout, "puller").insert(self.feed.rows, self.seq)

    def resolve(self, resolved: dict[str, int], ddl_resolved: int):
        ids = {pid: resolved[name] for name in resolved for pid in self.up.table("shop", name).physical_ids()}
        self.seq += 1
        WatermarkWriter(self.layout, "puller").write(ids, ddl_resolved, 0, 0, self.seq)

    def merge(self, spark, layout, tables, until_ts):
        """What run_merge(until_ts=S) leaves: each table's replica at checkpoint S, but for the
        tables in `held` (another writer holds their lease: blocked, the line naming it)."""
        self.merges.append((sorted(tables), until_ts))
        history = SchemaHistory.load(layout)
        report = MergeReport("fake", datetime.now(timezone.utc), Watermarks({}, 0, 0))
        for name in tables:
            key = history.find(*name.split("."))
            if name in self.held:
                report.tables.append(TableResult(key, name, MergeStatus.BLOCKED, reason=self.held[name], held=True))
                continue
            if name in self.no_room:
                report.tables.append(TableResult(key, name, MergeStatus.ERROR, reason=self.no_room[name], no_room=True))
                continue
            _commit(self.catalog.get(key).path, until_ts)
            report.tables.append(TableResult(key, name, MergeStatus.MERGED, checkpoint_after=until_ts))
        return report

    def path(self, name):
        key = SchemaHistory(self.feed.rows).find("shop", name)
        return self.catalog.get(key).path


def test_syncpoint_cuts_every_table_at_one_aligned_ts(tmp_path, capsys):
    lake = Lake(tmp_path)
    now = lake.up.ts
    lake.resolve({"a": now + (25_000 << 18), "b": now + (12_000 << 18)}, ddl_resolved=now + (40_000 << 18))
    result = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    s = boundary_at_or_below(now + (12_000 << 18), INTERVAL_S)
    assert result.recorded and result.ts == s and s > now
    assert tso.physical_ms(s) % (INTERVAL_S * 1000) == 0 and tso.logical(s) == 0
    assert lake.merges == [(["shop.a", "shop.b"], s)]
    versions = replicas_at(lake.layout, s)
    assert set(versions) == {"shop.a", "shop.b"}
    for name, version in versions.items():
        assert checkpoint_at_version(lake.path(name.split(".")[1]), version) == s

    # nothing new reachable: no merge, no second row
    again = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert not again.recorded and len(lake.merges) == 1
    assert merge_cap(lake.layout, INTERVAL_S) == next_boundary(s, INTERVAL_S)

    with pytest.raises(InputError, match=f"nearest: {s} "):
        replicas_at(lake.layout, s + 1)
    assert main(["snapshot-at", str(s), "--lake", lake.layout.root, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {r["table"]: r["version"] for r in printed["replicas"]} == versions
    assert main(["snapshot-at", str(s - 1), "--lake", lake.layout.root]) == 2
    assert "is not a syncpoint" in capsys.readouterr().err


def test_a_truncate_inside_the_window_does_not_hold_the_cut(tmp_path):
    lake = Lake(tmp_path)
    lake.feed.run(lake.up.truncate_table("shop", "b"))
    lake.flush_ddl()
    truncated_at = lake.up.ts
    # the old physical id of b stopped at the truncate; its new id and a are far ahead
    lake.seq += 1
    old_b = SchemaHistory(lake.feed.rows).ddl_events(SchemaHistory(lake.feed.rows).find("shop", "b"))[0]
    far = truncated_at + (30_000 << 18)
    ids = {lake.up.table("shop", "a").id: far, lake.up.table("shop", "b").id: far,
           old_b.physical_ids_after[0]: truncated_at - 1}
    WatermarkWriter(lake.layout, "puller").write(ids, far, 0, 0, lake.seq)
    result = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert result.recorded and result.ts == boundary_at_or_below(far, INTERVAL_S) > truncated_at


def test_a_table_that_left_the_filter_does_not_hold_the_cut(tmp_path):
    """A `filter` row (the puller's, when [filter].rules stopped selecting b) ends b's life at L:
    b's watermark stays at L - 1 for good, and the cut goes on past it without b."""
    lake = Lake(tmp_path)
    b = lake.up.table("shop", "b")
    (created,) = [r for r in lake.feed.rows if r.table_id == b.id]
    left_at = lake.up.ts + (5_000 << 18)
    lake.feed.rows.append(DdlRow(job_id=0, commit_ts=left_at, schema_version=0, action=int(ActionType.DROP_TABLE),
                                 action_name="leave changefeed ([filter].rules)", schema_id=created.schema_id,
                                 schema_name="shop", table_id=b.id, table_name="b", query=None, table_info=None,
                                 db_info=None, source=DdlSource.FILTER))
    lake.flush_ddl()
    far = lake.up.ts + (30_000 << 18)
    lake.resolve({"a": far, "b": left_at - 1}, ddl_resolved=far)
    result = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert result.recorded and result.ts == boundary_at_or_below(far, INTERVAL_S) > left_at
    assert list(replicas_at(lake.layout, result.ts)) == ["shop.a"]


def test_tables_ahead_raise_the_first_cut_and_stopped_tables_are_listed(tmp_path):
    lake = Lake(tmp_path)
    now = lake.up.ts
    raised = next_boundary(now + (15_000 << 18), INTERVAL_S)
    _commit(lake.path("a"), now + (15_000 << 18))  # merged without a cap before any syncpoint existed
    lake.resolve({"a": now + (50_000 << 18), "b": now + (12_000 << 18)}, ddl_resolved=now + (50_000 << 18))
    waiting = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert not waiting.recorded and waiting.ts == raised and "waiting" in waiting.reason
    assert lake.merges == []

    lake.resolve({"a": now + (50_000 << 18), "b": now + (25_000 << 18)}, ddl_resolved=now + (50_000 << 18))
    first = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert first.recorded and first.ts == raised
    assert lake.merges == [(["shop.a", "shop.b"], first.ts)]

    b = SchemaHistory(lake.feed.rows).find("shop", "b")
    lake.catalog.mark_stopped(b, "modify column: unsupported", now)
    second = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)  # b no longer holds the cut
    assert second.recorded and second.ts == boundary_at_or_below(now + (50_000 << 18), INTERVAL_S)
    assert second.syncpoint.excluded == {"shop.b": "modify column: unsupported"}
    assert lake.merges[-1] == (["shop.a"], second.ts) and read_checkpoint(lake.path("b")) == first.ts
    assert list(replicas_at(lake.layout, second.ts)) == ["shop.a"]
    assert DeltaTable(lake.path("a")).version() == replicas_at(lake.layout, second.ts)["shop.a"]


def test_a_replica_another_writer_holds_puts_the_cut_off_with_its_line(tmp_path, monkeypatch, capsys):
    lake = Lake(tmp_path)
    now = lake.up.ts
    lake.resolve({"a": now + (25_000 << 18), "b": now + (25_000 << 18)}, ddl_resolved=now + (25_000 << 18))
    line = "replica of shop.b is being written by `tidelake merge --config cf.toml` (host h, pid 7) since T"
    lake.held = {"shop.b": line}
    held = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert held.outcome is SyncpointOutcome.HELD and held.reason == line
    assert read_syncpoints(lake.layout) == []

    monkeypatch.setattr("tidelake.cli.syncpoint_command.get_session", lambda *a, **k: None)
    monkeypatch.setattr("tidelake.cli.syncpoint_command.release_session", lambda spark: None)
    monkeypatch.setattr("tidelake.cli.syncpoint_command.run_syncpoint",
                        lambda spark, layout, interval: run_syncpoint(spark, layout, interval, merge=lake.merge))
    assert main(["syncpoint", "--lake", lake.layout.root, "--interval", str(INTERVAL_S)]) == EXIT_TRY_LATER
    assert capsys.readouterr().err == f"tidelake syncpoint: cut {held.ts} not taken now: {line}\n"

    lake.held = {}  # the other writer is done: the next attempt takes the same cut
    taken = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert taken.recorded and taken.ts == held.ts
    assert read_checkpoint(lake.path("b")) == held.ts


def test_a_replica_the_store_had_no_room_for_puts_the_cut_off_with_its_line_and_exit_75(tmp_path, monkeypatch, capsys):
    lake = Lake(tmp_path)
    now = lake.up.ts
    lake.resolve({"a": now + (25_000 << 18), "b": now + (25_000 << 18)}, ddl_resolved=now + (25_000 << 18))
    line = "the lake's filesystem is full: OSError: [Errno 28] No space left on device"
    lake.no_room = {"shop.b": line}
    monkeypatch.setattr("tidelake.cli.syncpoint_command.get_session", lambda *a, **k: None)
    monkeypatch.setattr("tidelake.cli.syncpoint_command.release_session", lambda spark: None)
    monkeypatch.setattr("tidelake.cli.syncpoint_command.run_syncpoint",
                        lambda spark, layout, interval: run_syncpoint(spark, layout, interval, merge=lake.merge))
    assert main(["syncpoint", "--lake", lake.layout.root, "--interval", str(INTERVAL_S)]) == EXIT_TRY_LATER
    s = boundary_at_or_below(now + (25_000 << 18), INTERVAL_S)
    assert capsys.readouterr().err == f"tidelake syncpoint: cut {s} not taken: shop.b: {line}\n"
    assert read_syncpoints(lake.layout) == []

    lake.no_room = {}  # room again: the next attempt takes the same cut
    taken = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
    assert taken.recorded and taken.ts == s


def test_a_cut_whose_record_finds_the_filesystem_full_is_one_line_and_taken_once_grown(tmp_path, monkeypatch, capsys):
    """The record of the cut on a real full filesystem (a tmpfs, tests/lake/tiny_fs.py): one line,
    exit 75, nothing recorded; grown, the next attempt records the same cut."""
    with tiny_tmpfs(tmp_path / "mnt", "4m") as mnt:
        lake = Lake(mnt / "lake")
        now = lake.up.ts
        lake.resolve({"a": now + (25_000 << 18), "b": now + (25_000 << 18)}, ddl_resolved=now + (25_000 << 18))
        monkeypatch.setattr("tidelake.cli.syncpoint_command.get_session", lambda *a, **k: None)
        monkeypatch.setattr("tidelake.cli.syncpoint_command.release_session", lambda spark: None)
        monkeypatch.setattr("tidelake.cli.syncpoint_command.run_syncpoint",
                            lambda spark, layout, interval: run_syncpoint(spark, layout, interval, merge=lake.merge))
        with armed(["syncpoint.before_record"], lambda name, ts: fill(mnt)):
            assert main(["syncpoint", "--lake", lake.layout.root, "--interval", str(INTERVAL_S)]) == EXIT_TRY_LATER
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("tidelake: error: the lake's filesystem is full: "), line
        assert read_syncpoints(lake.layout) == []
        grow(mnt, "64m")
        taken = run_syncpoint(None, lake.layout, INTERVAL_S, merge=lake.merge)
        assert taken.recorded and taken.ts == boundary_at_or_below(now + (25_000 << 18), INTERVAL_S)
