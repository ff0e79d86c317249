"""Changing a changefeed's shard count: which watermarks a new shard adopts, when the old go."""

from datetime import datetime, timedelta, timezone

from tidelake.capture.changefeed.reshard import (
    Retirement,
    adopt,
    layout_of,
    missing_shards,
)
from tidelake.capture.landing.watermark_writer import WatermarkWriter
from tidelake.lake.layout import LakeLayout
from tidelake.lake.watermarks import PullerMarks, Watermarks, read_by_puller

P = "tidelake-puller/"
NOW = datetime(2026, 11, 22, tzinfo=timezone.utc)


def marks(ddl: int, **tables: int) -> PullerMarks:
    return PullerMarks(Watermarks({int(k[1:]): v for k, v in tables.items()}, ddl, 0), NOW)


def test_puller_names_of_this_changefeed_only():
    assert layout_of(P + "cf1", "cf1") == 1
    assert layout_of(P + "cf1-shard3of4", "cf1") == 4
    assert layout_of(P + "cf10", "cf1") is None and layout_of(P + "cf1-shard0of2", "cf2") is None
    assert layout_of(P + "cf1-shardXof2", "cf1") is None and layout_of("cf1", "cf1") is None


def test_a_new_layout_adopts_the_lowest_watermark_any_previous_shard_claims():
    by_puller = {
        P + "cf1-shard0of2": marks(50, t110=40, t112=70),
        P + "cf1-shard1of2": marks(45, t111=60, t112=30),  # 112 moving between owners: the lower counts
        P + "cf1-shard0of3": marks(55, t111=65),  # a sibling of the new layout: not adopted from
        P + "cf2": marks(1, t110=1),  # another changefeed
    }
    adopted = adopt(by_puller, "cf1", 3)
    assert adopted.table_resolved == {110: 40, 111: 60, 112: 30} and adopted.ddl_resolved == 45
    assert adopted.previous == (P + "cf1-shard0of2", P + "cf1-shard1of2")
    assert adopt({P + "cf1-shard0of3": marks(5)}, "cf1", 3) is None  # a restart, not a new layout
    assert adopt({}, "cf1", 1) is None  # a first run


def test_the_shards_of_the_current_layout_without_a_partition():
    old = {P + "cf1": marks(50, t110=40)}
    assert missing_shards(old, "cf1", 2) == [0, 1]
    assert missing_shards({**old, P + "cf1-shard1of2": marks(50)}, "cf1", 2) == [0]
    assert missing_shards({**old, P + "cf1-shard0of2": marks(50), P + "cf1-shard1of2": marks(50)}, "cf1", 2) == []


def write(layout: LakeLayout, puller: str, seq: int, ddl: int, tables: dict[int, int]) -> None:
    assert WatermarkWriter(layout, puller).write(tables, ddl, 0, 0, seq)


def test_retirement_waits_until_the_old_pullers_stopped_writing_then_removes_safepoints_and_rows(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    removed = []
    write(layout, P + "cf1-shard0of2", 1, 50, {110: 40})
    write(layout, P + "cf1-shard1of2", 1, 50, {111: 40})
    write(layout, P + "cf1", 1, 50, {110: 40, 111: 40})  # the new layout: one shard
    clock = [datetime.now(timezone.utc)]
    retirement = Retirement(layout, "cf1", 1, "tidelake-cf1", removed.append, grace_s=60, now=lambda: clock[0])
    retirement.poll()  # the old rows were written moments ago: their pullers may still run
    assert removed == [] and len(read_by_puller(layout)) == 3
    clock[0] += timedelta(seconds=61)
    write(layout, P + "cf1-shard1of2", 2, 60, {111: 55})  # an old shard still runs
    clock[0] = datetime.now(timezone.utc) + timedelta(seconds=30)
    retirement.poll()
    assert removed == [] and len(read_by_puller(layout)) == 3
    clock[0] += timedelta(seconds=31)  # a grace period without a rewrite: stopped
    retirement.poll()
    assert list(read_by_puller(layout)) == [P + "cf1"]
    assert sorted(removed) == ["tidelake-cf1-shard0of2", "tidelake-cf1-shard1of2"]


def test_retirement_waits_for_every_shard_of_the_new_layout_and_says_which_is_missing(tmp_path, caplog):
    layout = LakeLayout(str(tmp_path / "lake"))
    write(layout, P + "cf1", 1, 50, {110: 40, 111: 40})
    write(layout, P + "cf1-shard0of2", 1, 50, {110: 40})
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    retirement = Retirement(layout, "cf1", 2, "tidelake-cf1", lambda service: None, grace_s=60, now=lambda: later)
    with caplog.at_level("WARNING", logger="tidelake.capture.changefeed.reshard"):
        retirement.poll()
        retirement.poll()
    assert len(read_by_puller(layout)) == 2  # shard 1 of 2 has not landed its own rows yet
    said = [r.getMessage() for r in caplog.records if "have not started" in r.getMessage()]
    assert said == ["changefeed cf1: shard(s) 1/2 of its 2-shard layout have not started; until they land their "
                    "watermarks, merge waits on the previous layout's"]  # once, not every poll


def test_a_failing_safepoint_removal_keeps_the_rows_for_the_next_poll(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    write(layout, P + "cf1", 1, 50, {110: 40})
    write(layout, P + "cf1-shard0of2", 1, 50, {110: 40})
    write(layout, P + "cf1-shard1of2", 1, 50, {111: 40})
    later = datetime.now(timezone.utc) + timedelta(hours=1)

    def pd_down(service):
        raise ConnectionError("PD unreachable")

    Retirement(layout, "cf1", 2, "tidelake-cf1", pd_down, grace_s=60, now=lambda: later).poll()
    assert P + "cf1" in read_by_puller(layout)  # its safepoint is still held, so are its rows


def test_a_changefeed_that_never_changed_its_layout_keeps_its_rows(tmp_path):
    layout = LakeLayout(str(tmp_path / "lake"))
    write(layout, P + "cf1", 1, 50, {110: 40})
    write(layout, P + "cf2-shard0of2", 1, 50, {110: 40})  # another changefeed's
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    Retirement(layout, "cf1", 1, "tidelake-cf1", lambda service: None, grace_s=60, now=lambda: later).poll()
    assert set(read_by_puller(layout)) == {P + "cf1", P + "cf2-shard0of2"}
