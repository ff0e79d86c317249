"""[filter].rules widened between two runs: a table the changefeed never fed joins at one ts J
with its schema, as a bootstrap request would add it, instead of being fed from the restart with
its earlier rows in no changelog. Oracle: the simulator's MVCC write records."""

from __future__ import annotations

import random

from lake.ddl_jobs import DdlFeed, Upstream

from tests.capture.changefeed.test_puller_runner import SHOP, shop, some_rows
from tests.capture.pull_harness import (  # noqa: F401 (sim is a fixture)
    changelog,
    ddl_rows,
    make_config,
    oracle,
    sim,
    start_ts,
    wait_resolved,
    watermarks,
)
from tidelake import tso
from tidelake.capture.changefeed.filter_change import filter_change
from tidelake.capture.changefeed.puller_thread import PullerThread
from tidelake.capture.landing.ddl_writer import DdlWriter
from tidelake.codec.keys import record_key
from tidelake.lake.layout import DdlSource, LakeLayout
from tidelake.lake.table_starts import StartState, TableStarts
from tidelake.table_filter import TableFilter
from tidelake.upstream.schema_tracker import SchemaTracker
from tidelake.wait import wait_until


def joined(lake) -> list:
    return [s for s in TableStarts(LakeLayout(str(lake))).latest("cf1") if s.state == StartState.JOINED]


def test_a_table_the_widened_rules_select_joins_with_its_schema_at_one_ts(sim, tmp_path):
    rng = random.Random(3)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    some_rows(tidb, rng, 111)  # before the changefeed: bootstrap's to read
    with PullerThread(make_config(sim, lake, rules=("shop.t110",))) as run:
        last = max(some_rows(tidb, rng, 110), some_rows(tidb, rng, 111))
        wait_resolved(lake, {110: last}, runner=run)
    some_rows(tidb, rng, 111)  # while no puller runs
    with PullerThread(make_config(sim, lake, rules=("shop.*",)), table_starts_poll_s=0.2) as run:
        wait_until(lambda: joined(lake), 30, "t111 joined", check=lambda: run.error)
        (join,) = joined(lake)
        last = max(some_rows(tidb, rng, 110), some_rows(tidb, rng, 111))
        wait_resolved(lake, {110: last, 111: last}, runner=run)
    assert (join.db, join.table) == ("shop", "t111")
    landed = {row for row in changelog(lake) if row[0] == 111}
    assert landed == oracle(sim, 111, join.start_ts), "t111's changelog is every commit after its join, no other"
    (schema,) = [r for r in ddl_rows(lake) if r["table_id"] == 111]
    assert (schema["source"], schema["commit_ts"]) == (DdlSource.SNAPSHOT, join.start_ts)


def test_tables_that_came_in_by_a_ddl_are_not_taken_for_new_ones_at_a_restart(sim, tmp_path):
    rng = random.Random(4)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110)
    config = make_config(sim, lake)
    with PullerThread(config) as run:
        tidb.create_table(2, 112, "t112")
        tidb.truncate_table(110, 113)
        last = max(some_rows(tidb, rng, 112), some_rows(tidb, rng, 113))
        wait_resolved(lake, {112: last, 113: last}, runner=run)
    restart = sim.tso.next()
    with PullerThread(config, table_starts_poll_s=0.2) as run:
        last = max(some_rows(tidb, rng, 112), some_rows(tidb, rng, 113))
        wait_resolved(lake, {112: last, 113: last}, runner=run)
    assert TableStarts(LakeLayout(str(lake))).latest("cf1") == []
    for table_id in (112, 113):
        landed = {row for row in changelog(lake) if row[0] == table_id and row[2] > restart}
        assert landed == oracle(sim, table_id, restart)


def test_a_table_the_narrowed_rules_drop_leaves_where_its_data_is_complete_and_cannot_rejoin(sim, tmp_path, caplog):
    rng = random.Random(5)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    wide, narrow = (make_config(sim, lake, rules=rules) for rules in (("shop.*",), ("shop.t110",)))
    with PullerThread(wide) as run:
        start_ts(lake, run)
        last = max(some_rows(tidb, rng, 110), some_rows(tidb, rng, 111))
        wait_resolved(lake, {110: last, 111: last}, runner=run)
    fed_to = watermarks(lake).table_resolved[111]
    for config in (narrow, narrow, wide):  # the second run lands no second row; then it is selected again
        with PullerThread(config, table_starts_poll_s=0.2) as run:
            last = max(some_rows(tidb, rng, 110), some_rows(tidb, rng, 111))
            wait_resolved(lake, {110: last}, last, runner=run)
    (leave,) = [r for r in ddl_rows(lake) if r["source"] == DdlSource.FILTER]
    (first,) = [r["commit_ts"] for r in ddl_rows(lake) if r["table_id"] == 111 and r["source"] == DdlSource.SNAPSHOT]
    assert (leave["table_id"], leave["commit_ts"]) == (111, max(fed_to, first) + 1)
    assert watermarks(lake).table_resolved[111] == fed_to, "t111 was never fed again"
    fed = {row for row in changelog(lake) if row[0] == 111}
    assert fed and fed == oracle(sim, 111, first) - oracle(sim, 111, fed_to), "t111's rows while fed, none after"
    assert TableStarts(LakeLayout(str(lake))).latest("cf1") == []
    assert any("shop.t111 left changefeed cf1" in m and "cannot rejoin" in m for m in caplog.messages)


def test_a_table_the_narrowed_rules_drop_while_its_watermark_lags_its_last_ddl_is_fed_up_to_that_ddl(sim, tmp_path):
    """A lock holds shop.t111's watermark below its RENAME when the puller stops; then the rules
    drop it. It leaves at L = the RENAME's ts + 1, so the restarted puller feeds it until L - 1
    first: the merge can take its replica there, and the rows up to L - 1 are every commit."""
    rng = random.Random(6)
    lake = tmp_path / "lake"
    tidb = shop(sim, 110, 111)
    wide, narrow = (make_config(sim, lake, rules=rules) for rules in (("shop.*",), ("shop.t110",)))
    primary = record_key(111, 100)
    with PullerThread(wide) as run:
        first = start_ts(lake, run)
        some_rows(tidb, rng, 111)
        lock_ts = sim.tso.next()
        sim.mvcc.prewrite([("put", primary, b"held")], primary, lock_ts, 600_000)
        some_rows(tidb, rng, 111)
        renamed = tidb.rename_table(111, SHOP, "t111_renamed")
        wait_resolved(lake, {110: some_rows(tidb, rng, 110)}, renamed, runner=run)
    assert watermarks(lake).table_resolved[111] < renamed, "the lock held t111 below its RENAME"
    sim.mvcc.commit([primary], lock_ts, sim.tso.next())
    with PullerThread(narrow) as run:
        wait_until(lambda: watermarks(lake).table_resolved[111] >= renamed, 30, "t111 fed up to its RENAME",
                   check=lambda: run.error)
    (leave,) = [r for r in ddl_rows(lake) if r["source"] == DdlSource.FILTER]
    assert (leave["table_id"], leave["commit_ts"]) == (111, renamed + 1)
    landed = {row for row in changelog(lake) if row[0] == 111 and row[2] <= renamed}
    assert landed == {row for row in oracle(sim, 111, first) if row[2] <= renamed}


def test_a_table_a_bootstrap_request_names_never_leaves_and_one_renamed_out_does(tmp_path):
    """filter_change alone, on a lake the DdlFeed stand-in landed: shop.b is out of the rules but
    a bootstrap request names it (its join's schema landed, the shard not joined yet); shop.c
    was renamed out of the rules by a DDL the lake holds."""
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_schema("other")
    for name in ("a", "b", "c"):
        up.create_table("shop", name, [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    feed.run(up.rename_table("shop", "c", "other", "c"))
    layout = LakeLayout(str(tmp_path / "lake"))
    DdlWriter(layout, "puller").insert(feed.rows, 1)
    starts = TableStarts(layout)
    starts.mark(starts.request("cf1", "shop", "b"), StartState.SCHEMA_LANDED, start_ts=up.ts + (10_000 << 18))
    tracker = SchemaTracker(up.snapshot(), TableFilter.parse(["shop.a"]), lambda ts: up.snapshot())
    change = filter_change(tracker, layout, "cf1", {}, starts.latest("cf1"))
    (leave,) = change.leaving
    renamed = up.table("other", "c")
    assert (leave.table_id, leave.schema_name, leave.table_name) == (renamed.id, "other", "c")
    assert leave.commit_ts == max(r.commit_ts for r in feed.rows if r.table_id == renamed.id) + 1
    assert change.held == {} and change.left == []


def test_a_restart_takes_no_ddl_job_above_its_durable_ddl_watermark_for_a_filter_change(tmp_path):
    """A flush landed a TRUNCATE's `ddl` row and failed before its watermarks (nemesis seed 9127):
    the restarted puller's schema is as of the durable DDL watermark, before the TRUNCATE, and it
    pulls the job again. shop.a is still selected and fed: it neither leaves nor is held back."""
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_table("shop", "a", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    fed = up.table("shop", "a").id
    tracker = SchemaTracker(up.snapshot(), TableFilter.parse(["shop.*"]), lambda ts: up.snapshot())
    feed.run(up.truncate_table("shop", "a"))
    layout = LakeLayout(str(tmp_path / "lake"))
    DdlWriter(layout, "puller").insert(feed.rows, 1)
    change = filter_change(tracker, layout, "cf1", {fed: tracker.ts}, [])
    assert change.leaving == [], "no `filter` row for a table the rules still select"
    assert change.held == {} and change.unrequested == [] and change.left == []


def test_a_restart_inside_a_ddl_job_that_changed_the_ids_takes_no_table_for_one_that_left(tmp_path):
    """The restart's schema snapshot already has a TRUNCATE's new id (TiDB writes the table's meta
    before the job is done) while the lake's history still names the old one (nemesis seed 9234,
    a REMOVE PARTITIONING in flight): shop.a is still selected, so it does not leave."""
    up = Upstream(ts=tso.compose(1_800_000_000_000))
    up.create_schema("shop")
    up.create_table("shop", "a", [("id", "bigint", "pk")])
    feed = DdlFeed(up)
    layout = LakeLayout(str(tmp_path / "lake"))
    DdlWriter(layout, "puller").insert(feed.rows, 1)
    old = up.table("shop", "a").id
    up.truncate_table("shop", "a")  # not finished yet: no job row in the lake
    tracker = SchemaTracker(up.snapshot(), TableFilter.parse(["shop.*"]), lambda ts: up.snapshot())
    change = filter_change(tracker, layout, "cf1", {old: tracker.ts}, [])
    assert change.leaving == [] and change.left == []
